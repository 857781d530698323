// Where kvreg-sys links libkvreg from: the one decision build.rs makes, kept apart from cargo's
// I/O so tests/locate.rs can check it (both `include!` this file).
//
// Order: KVREG_LIBRARY (the library file, or the directory holding it); KVREG_LIB_DIR (the
// directory, the older name); `pkg-config kvreg`; the linker's and loader's default path.
// Every step that found nothing is recorded, so a failed link can say what was tried.

/// What build.rs tells cargo.
#[derive(Debug, PartialEq, Eq)]
pub struct Plan {
    /// `-L` directories, in order.
    pub search: Vec<String>,
    /// `-l` names (always ends up linking `kvreg`).
    pub libs: Vec<String>,
    /// Where the link comes from, for messages.
    pub source: String,
    /// Steps tried before the one that answered, with why they did not.
    pub tried: Vec<String>,
}

/// `var`: an environment lookup. `pkg_config_libs`: the output of `pkg-config --libs kvreg`,
/// or Err(why) when pkg-config is missing or does not know kvreg. `is_dir`: a filesystem test.
pub fn locate(
    var: &dyn Fn(&str) -> Option<String>,
    pkg_config_libs: &dyn Fn() -> Result<String, String>,
    is_dir: &dyn Fn(&str) -> bool,
) -> Plan {
    let mut tried = Vec::new();
    if let Some(path) = var("KVREG_LIBRARY").filter(|p| !p.is_empty()) {
        let dir = if is_dir(&path) {
            path.clone()
        } else {
            match path.rfind('/') {
                Some(0) => "/".to_string(),
                Some(i) => path[..i].to_string(),
                None => ".".to_string(),
            }
        };
        return Plan {
            search: vec![dir],
            libs: vec!["kvreg".to_string()],
            source: format!("KVREG_LIBRARY={}", path),
            tried,
        };
    }
    tried.push("KVREG_LIBRARY: not set".to_string());
    if let Some(dir) = var("KVREG_LIB_DIR").filter(|p| !p.is_empty()) {
        return Plan {
            search: vec![dir.clone()],
            libs: vec!["kvreg".to_string()],
            source: format!("KVREG_LIB_DIR={}", dir),
            tried,
        };
    }
    tried.push("KVREG_LIB_DIR: not set".to_string());
    match pkg_config_libs() {
        Ok(flags) => {
            let mut plan = Plan {
                search: Vec::new(),
                libs: Vec::new(),
                source: format!("pkg-config kvreg: {}", flags.trim()),
                tried,
            };
            for flag in flags.split_whitespace() {
                if let Some(dir) = flag.strip_prefix("-L") {
                    plan.search.push(dir.to_string());
                } else if let Some(name) = flag.strip_prefix("-l") {
                    plan.libs.push(name.to_string());
                }
                // Anything else (-pthread, -Wl,...) is for C linkers; the shared library
                // carries its own dependencies, so nothing is lost by dropping it.
            }
            if !plan.libs.iter().any(|l| l == "kvreg") {
                plan.libs.push("kvreg".to_string());
            }
            plan
        }
        Err(why) => {
            tried.push(format!("pkg-config kvreg: {}", why));
            Plan {
                search: Vec::new(),
                libs: vec!["kvreg".to_string()],
                source: "the linker's default path (-lkvreg)".to_string(),
                tried,
            }
        }
    }
}
