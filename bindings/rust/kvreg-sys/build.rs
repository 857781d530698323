//! Finds libkvreg for linking. No vendored C and no crates: `KVREG_LIBRARY` (libkvreg.so or
//! its directory) or `KVREG_LIB_DIR` (the directory) wins; else the system's `pkg-config`
//! program is asked (as libgit2-sys does); else the linker's default path. The order and the
//! message listing the tries are in locate.rs.

use std::env;
use std::path::Path;
use std::process::Command;

/// Oldest libkvreg whose header these declarations match.
const MIN_VERSION: &str = "0.3.0";

include!("locate.rs");

fn main() {
    // Re-run when anything that changes the answer changes; otherwise cargo caches a stale path.
    for var in [
        "KVREG_LIBRARY",
        "KVREG_LIB_DIR",
        "PKG_CONFIG",
        "PKG_CONFIG_PATH",
        "PKG_CONFIG_LIBDIR",
        "PKG_CONFIG_SYSROOT_DIR",
    ] {
        println!("cargo:rerun-if-env-changed={}", var);
    }
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=locate.rs");

    let pkg_config = env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".to_string());
    let plan = locate(
        &|name| env::var(name).ok(),
        &|| pkg_config_libs(&pkg_config),
        &|path| Path::new(path).is_dir(),
    );
    for dir in &plan.search {
        println!("cargo:rustc-link-search=native={}", dir);
    }
    for lib in &plan.libs {
        println!("cargo:rustc-link-lib={}", lib);
    }
    if !plan.tried.is_empty() && plan.search.is_empty() {
        // Nothing named a directory: the link may still work (a system install), but if it
        // fails, cargo shows this line beside the linker's error.
        println!(
            "cargo:warning=kvreg-sys: linking libkvreg from {}; tried {}. If the link fails: \
             install libkvreg, put its kvreg.pc on PKG_CONFIG_PATH (prefix P on Debian: \
             P/lib/x86_64-linux-gnu/pkgconfig), or set KVREG_LIBRARY to libkvreg.so or its directory",
            plan.source,
            plan.tried.join("; ")
        );
    }

    // Exposed to dependents as DEP_KVREG_INCLUDE (the `links` metadata), for crates that
    // compile C against the same header. Only one value survives, so pick the directory that
    // holds kvreg.h (an uninstalled .pc lists several -I).
    if let Some(cflags) = run(&pkg_config, &["--cflags", "kvreg"]) {
        let header_dir = cflags
            .split_whitespace()
            .filter_map(|flag| flag.strip_prefix("-I"))
            .find(|dir| Path::new(dir).join("kvreg.h").is_file());
        if let Some(dir) = header_dir {
            println!("cargo:include={}", dir);
            // For this crate's own test that the consts match the header's #defines.
            println!("cargo:rustc-env=KVREG_SYS_HEADER={}", Path::new(dir).join("kvreg.h").display());
        }
    }
}

/// `pkg-config --libs kvreg` for a new enough kvreg, or why not (too old, not found).
fn pkg_config_libs(pkg_config: &str) -> Result<String, String> {
    // --atleast-version exits non-zero both for "too old" and "not found"; say which helps.
    if run(pkg_config, &["--atleast-version", MIN_VERSION, "kvreg"]).is_none() {
        return Err(match run(pkg_config, &["--modversion", "kvreg"]) {
            Some(v) => fail(&format!(
                "libkvreg {} found by {}, but >= {} is required",
                v.trim(),
                pkg_config,
                MIN_VERSION
            )),
            None => format!("`{} kvreg` found no kvreg.pc (or no {})", pkg_config, pkg_config),
        });
    }
    run(pkg_config, &["--libs", "kvreg"]).ok_or_else(|| "pkg-config --libs kvreg failed".to_string())
}

/// Runs the program; Some(stdout) on exit status 0, None on any failure to run or succeed.
fn run(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program).args(args).output().ok()?;
    if out.status.success() {
        String::from_utf8(out.stdout).ok()
    } else {
        None
    }
}

fn fail(msg: &str) -> ! {
    eprintln!("kvreg-sys: {}", msg);
    panic!("kvreg-sys: {}", msg);
}
