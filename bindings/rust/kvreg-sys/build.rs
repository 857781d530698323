//! Finds libkvreg for linking. No vendored C and no crates: the system's `pkg-config` program
//! is asked (as libgit2-sys does), unless `KVREG_LIB_DIR` names the directory holding
//! libkvreg.so, which skips pkg-config entirely (cross builds, unusual layouts).

use std::env;
use std::path::Path;
use std::process::Command;

/// Oldest libkvreg whose header these declarations match.
const MIN_VERSION: &str = "0.3.0";

fn main() {
    // Re-run when anything that changes the answer changes; otherwise cargo caches a stale path.
    for var in [
        "KVREG_LIB_DIR",
        "PKG_CONFIG",
        "PKG_CONFIG_PATH",
        "PKG_CONFIG_LIBDIR",
        "PKG_CONFIG_SYSROOT_DIR",
    ] {
        println!("cargo:rerun-if-env-changed={}", var);
    }
    println!("cargo:rerun-if-changed=build.rs");

    if let Some(dir) = env::var_os("KVREG_LIB_DIR") {
        let dir = dir.to_string_lossy().into_owned();
        println!("cargo:rustc-link-search=native={}", dir);
        println!("cargo:rustc-link-lib=dylib=kvreg");
        return;
    }

    let pkg_config = env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".to_string());

    // --atleast-version exits non-zero both for "too old" and "not found"; say which helps.
    let ok = run(&pkg_config, &["--atleast-version", MIN_VERSION, "kvreg"]);
    if ok.is_none() {
        let found = run(&pkg_config, &["--modversion", "kvreg"]);
        match found {
            Some(v) => fail(&format!(
                "libkvreg {} found by {}, but >= {} is required",
                v.trim(),
                pkg_config,
                MIN_VERSION
            )),
            None => fail(&format!(
                "libkvreg not found by `{} kvreg`: install it (`meson install`), set \
                 PKG_CONFIG_PATH to the directory of its kvreg.pc (for a prefix P on Debian: \
                 P/lib/x86_64-linux-gnu/pkgconfig; a Meson build dir has meson-uninstalled/), \
                 or set KVREG_LIB_DIR",
                pkg_config
            )),
        }
    }

    let libs = run(&pkg_config, &["--libs", "kvreg"])
        .unwrap_or_else(|| fail("pkg-config --libs kvreg failed"));
    let mut linked = false;
    for flag in libs.split_whitespace() {
        if let Some(dir) = flag.strip_prefix("-L") {
            println!("cargo:rustc-link-search=native={}", dir);
        } else if let Some(name) = flag.strip_prefix("-l") {
            println!("cargo:rustc-link-lib={}", name);
            linked |= name == "kvreg";
        }
        // Anything else (-pthread, -Wl,...) is for C linkers; the shared library carries its
        // own dependencies, so nothing is lost by dropping it.
    }
    if !linked {
        println!("cargo:rustc-link-lib=dylib=kvreg");
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
