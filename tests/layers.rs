//! The crate's layers point one way, as `src/lib.rs` lists them: each imports only the layers
//! before it, and the allocator knows nothing of Kubernetes. Read from the source, not from
//! the compiler, so a test module's imports (which may reach anywhere) are left out.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

/// The layers, lowest first. A module may import a layer of a lower rank; modules of one rank
/// are siblings that do not import each other, except where `SIBLINGS` says.
const LAYERS: [(&str, u8); 9] = [
    ("allocator", 1),
    ("index", 2),
    ("store", 3),
    ("feed", 3),
    ("contract", 4),
    ("controller", 5),
    ("preflight", 5),
    ("inspect", 5),
    ("run", 6),
];

/// Sibling imports allowed: `inspect` answers with preflight's findings.
const SIBLINGS: [(&str, &str); 1] = [("inspect", "preflight")];

fn rank(module: &str) -> Option<u8> {
    LAYERS.iter().find(|(name, _)| *name == module).map(|(_, rank)| *rank)
}

/// The source files of a top-level module: `src/<m>.rs` and everything under `src/<m>/`,
/// without test files.
fn files_of(module: &str) -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    let single = root.join(format!("{module}.rs"));
    if single.exists() {
        files.push(single);
    }
    let mut dirs = vec![root.join(module)];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = fs::read_dir(&dir) else { continue };
        for entry in entries {
            let path = entry.expect("a directory entry").path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_owned();
            if path.is_dir() {
                if name != "tests" {
                    dirs.push(path);
                }
            } else if name.ends_with(".rs") && !name.ends_with("tests.rs") && name != "test_support.rs" {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// The code of a file without its comments and its `#[cfg(test)]` items.
fn code_of(text: &str) -> String {
    let mut code = String::new();
    let mut skip_depth: Option<i32> = None;
    let mut depth = 0i32;
    let mut test_item_next = false;
    for line in text.lines() {
        let line = line.split("//").next().unwrap_or_default();
        let trimmed = line.trim();
        if trimmed.starts_with("#[cfg(test)]") {
            test_item_next = true;
            continue;
        }
        let opens = line.matches('{').count() as i32;
        let closes = line.matches('}').count() as i32;
        if test_item_next {
            test_item_next = false;
            if trimmed.ends_with(';') {
                continue; // `mod x_tests;` or a test-only `use`
            }
            skip_depth = Some(depth);
        }
        depth += opens - closes;
        match skip_depth {
            Some(start) if depth <= start => skip_depth = None,
            Some(_) => {}
            None => {
                code.push_str(line);
                code.push('\n');
            }
        }
    }
    code
}

/// The top-level modules a piece of code names as `crate::<module>`.
fn crate_imports(code: &str) -> BTreeSet<String> {
    code.match_indices("crate::")
        .filter(|(at, _)| !code[..*at].ends_with(|c: char| c.is_alphanumeric() || c == '_'))
        .map(|(at, _)| code[at + "crate::".len()..].chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect())
        .collect()
}

#[test]
fn every_layer_imports_only_the_layers_before_it() {
    let mut upward = Vec::new();
    for (module, own) in LAYERS {
        let files = files_of(module);
        assert!(!files.is_empty(), "no source files for layer {module}: LAYERS is out of date");
        for file in files {
            let text = fs::read_to_string(&file).expect("a source file reads");
            for imported in crate_imports(&code_of(&text)) {
                let Some(theirs) = rank(&imported) else { continue };
                let allowed = imported == module
                    || theirs < own
                    || SIBLINGS.iter().any(|(from, to)| *from == module && *to == imported);
                if !allowed {
                    upward.push(format!("{} imports crate::{imported}", file.display()));
                }
            }
        }
    }
    assert!(upward.is_empty(), "imports against the layers of src/lib.rs:\n{}", upward.join("\n"));
}

#[test]
fn the_allocator_knows_nothing_of_kubernetes() {
    for file in files_of("allocator") {
        let code = code_of(&fs::read_to_string(&file).expect("a source file reads"));
        for name in ["kube::", "k8s_openapi::", "crate::api"] {
            assert!(!code.contains(name), "{} uses {name}", file.display());
        }
    }
}

#[test]
fn the_checker_sees_an_upward_import_and_ignores_comments_and_test_modules() {
    let code = code_of(
        "use crate::index::Index;\n// use crate::run::x;\nfn f() { crate::controller::g(); }\n\
         #[cfg(test)]\nmod tests {\n    use crate::run::y;\n    fn t() {\n    }\n}\n\
         #[cfg(test)]\nmod other_tests;\nfn h() {}\n",
    );
    let imports = crate_imports(&code);
    assert_eq!(imports, BTreeSet::from(["controller".to_owned(), "index".to_owned()]), "{code}");
    assert!(code.contains("fn h()"), "code after a test module is read: {code}");
}

#[test]
fn the_layers_listed_here_are_the_layers_the_crate_docs_list() {
    let lib = fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs")).expect("lib.rs reads");
    let start = lib.find("Layers point one way").expect("src/lib.rs lists the layers");
    let end = start + lib[start..].find("are leaves").expect("src/lib.rs names the leaves after the layers");
    let listed = &lib[start..end];
    for (module, _) in LAYERS {
        assert!(listed.contains(&format!("`{module}`")), "src/lib.rs's list of layers does not name {module}");
    }
}
