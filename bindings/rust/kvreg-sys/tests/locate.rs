//! The link-time search order of build.rs (locate.rs): KVREG_LIBRARY as a file or a
//! directory, KVREG_LIB_DIR, pkg-config, the default path; what was tried is listed.

include!("../locate.rs");

fn env_of<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
    move |name| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string())
}

fn no_pkg_config() -> Result<String, String> {
    Err("`pkg-config kvreg` found no kvreg.pc".to_string())
}

#[test]
fn library_as_a_file_links_from_its_directory() {
    let env = env_of(&[("KVREG_LIBRARY", "/opt/kv/lib/libkvreg.so")]);
    let plan = locate(&env, &|| panic!("pkg-config must not run"), &|_| false);
    assert_eq!(plan.search, vec!["/opt/kv/lib".to_string()]);
    assert_eq!(plan.libs, vec!["kvreg".to_string()]);
    assert_eq!(plan.source, "KVREG_LIBRARY=/opt/kv/lib/libkvreg.so");
}

#[test]
fn library_as_a_directory() {
    let env = env_of(&[("KVREG_LIBRARY", "/opt/kv/lib")]);
    let plan = locate(&env, &|| panic!("pkg-config must not run"), &|p| p == "/opt/kv/lib");
    assert_eq!(plan.search, vec!["/opt/kv/lib".to_string()]);
}

#[test]
fn pkg_config_when_nothing_is_set() {
    let plan = locate(
        &env_of(&[]),
        &|| Ok("-L/p/lib/x86_64-linux-gnu -Wl,-rpath,/p/lib/x86_64-linux-gnu -lkvreg\n".to_string()),
        &|_| false,
    );
    assert_eq!(plan.search, vec!["/p/lib/x86_64-linux-gnu".to_string()]);
    assert_eq!(plan.libs, vec!["kvreg".to_string()]);
    assert_eq!(plan.tried, vec!["KVREG_LIBRARY: not set", "KVREG_LIB_DIR: not set"]);
}

#[test]
fn default_path_last_and_every_try_listed() {
    let plan = locate(&env_of(&[("KVREG_LIBRARY", "")]), &no_pkg_config, &|_| false);
    assert!(plan.search.is_empty());
    assert_eq!(plan.libs, vec!["kvreg".to_string()]);
    assert_eq!(plan.source, "the linker's default path (-lkvreg)");
    assert_eq!(
        plan.tried,
        vec![
            "KVREG_LIBRARY: not set",
            "KVREG_LIB_DIR: not set",
            "pkg-config kvreg: `pkg-config kvreg` found no kvreg.pc",
        ]
    );
}
