//! The docs say what the code and the manifests do: label values of the metrics, the RBAC table,
//! the ports of the image, the make targets and clusterctl variables they name, the sticky
//! address wording of `--help`, and commands that work as written. Pure file reading.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use clap::CommandFactory;
use serde_json::Value;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("reading {path}: {e}"))
}

/// README.md and every Markdown file of docs/.
fn markdown() -> Vec<(PathBuf, String)> {
    let mut files = vec![root().join("README.md")];
    for entry in std::fs::read_dir(root().join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            files.push(path);
        }
    }
    files.into_iter().map(|p| (p.clone(), std::fs::read_to_string(&p).unwrap())).collect()
}

/// The string literals that directly follow `marker` in `text` (`instrumented("claim"` gives `claim`).
fn literals_after(text: &str, marker: &str) -> BTreeSet<String> {
    text.match_indices(marker)
        .filter_map(|(at, _)| {
            let rest = text[at + marker.len()..].trim_start().strip_prefix('"')?;
            Some(rest[..rest.find('"')?].to_owned())
        })
        .collect()
}

/// The table row of docs/metrics.md whose first cell is `metric`.
fn metric_row(metric: &str) -> String {
    let doc = read("docs/metrics.md");
    let row = doc.lines().find(|l| l.starts_with(&format!("| `{metric}` |")));
    row.unwrap_or_else(|| panic!("no row for {metric} in docs/metrics.md")).to_owned()
}

#[test]
fn every_controller_label_and_error_kind_of_the_code_is_in_metrics_md() {
    let mut controllers = BTreeSet::new();
    for entry in std::fs::read_dir(root().join("src/controller/wiring")).unwrap() {
        controllers.extend(literals_after(&std::fs::read_to_string(entry.unwrap().path()).unwrap(), "instrumented("));
    }
    assert!(controllers.len() >= 3, "{controllers:?}");
    let row = metric_row("ferro_ipam_reconciles_total");
    let missing: Vec<_> = controllers.iter().filter(|c| !row.contains(&format!("`{c}`"))).collect();
    assert!(missing.is_empty(), "controller labels missing from docs/metrics.md: {missing:?}");

    let error = read("src/controller/error.rs");
    let label_fn = &error[error.find("fn metric_label").expect("Error::metric_label")..];
    let label_fn = &label_fn[..label_fn.find("\n    }\n").expect("the end of metric_label")];
    let kinds = literals_after(label_fn, "=>");
    assert!(kinds.len() >= 4, "{kinds:?}");
    let row = metric_row("ferro_ipam_reconcile_errors_total");
    let missing: Vec<_> = kinds.iter().filter(|k| !row.contains(&format!("`{k}`"))).collect();
    assert!(missing.is_empty(), "error kinds missing from docs/metrics.md: {missing:?}");
}

/// (resource, verbs) of every rule of the RBAC files of deploy/base.
fn granted() -> BTreeSet<(String, BTreeSet<String>)> {
    let mut rules = BTreeSet::new();
    for file in ["deploy/base/rbac.yaml", "deploy/base/leader-election-rbac.yaml"] {
        let documents: Vec<Value> = serde_saphyr::from_multiple(&read(file)).unwrap();
        for rule in documents.iter().filter_map(|d| d["rules"].as_array()).flatten() {
            let verbs: BTreeSet<String> =
                rule["verbs"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_owned()).collect();
            for resource in rule["resources"].as_array().into_iter().flatten() {
                rules.insert((resource.as_str().unwrap().to_owned(), verbs.clone()));
            }
        }
    }
    rules
}

#[test]
fn the_rbac_table_names_every_resource_deploy_grants_with_its_verbs() {
    let doc = read("docs/operations.md");
    let section = &doc[doc.find("### Permissions").expect("a Permissions section")..];
    let rows: Vec<(&str, BTreeSet<String>)> = section
        .lines()
        .skip(1)
        .take_while(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            let verbs = cells.get(3)?.split(',').map(|v| v.trim().to_owned()).collect();
            Some((*cells.get(2)?, verbs))
        })
        .collect();
    let grants = granted();
    assert!(grants.len() >= 20, "{grants:?}");
    let missing: Vec<_> = grants
        .iter()
        .filter(|(resource, verbs)| {
            !rows.iter().any(|(cell, listed)| cell.contains(&format!("`{resource}`")) && listed == verbs)
        })
        .collect();
    assert!(missing.is_empty(), "(resource, verbs) granted by deploy/base but not in the table: {missing:?}");
}

#[test]
fn the_image_exposes_the_ports_the_deployment_opens() {
    let dockerfile: BTreeSet<String> = read("Dockerfile")
        .lines()
        .filter_map(|l| l.strip_prefix("EXPOSE "))
        .flat_map(|ports| ports.split_whitespace().map(str::to_owned))
        .collect();
    let deployment: Vec<Value> = serde_saphyr::from_multiple(&read("deploy/base/deployment.yaml")).unwrap();
    let container = &deployment[0]["spec"]["template"]["spec"]["containers"][0];
    let opened: BTreeSet<String> =
        container["ports"].as_array().unwrap().iter().map(|p| p["containerPort"].to_string()).collect();
    assert_eq!(dockerfile, opened, "the Dockerfile's EXPOSE against the Deployment's container ports");
    let build = read("deploy/image/build.sh");
    let crane = build.split("--exposed-ports ").nth(1).and_then(|r| r.split_whitespace().next()).unwrap();
    let crane: BTreeSet<String> = crane.split(',').map(|p| p.trim_end_matches("/tcp").to_owned()).collect();
    assert_eq!(crane, opened, "deploy/image/build.sh's ports against the Deployment's");
}

#[test]
fn every_make_target_named_in_docs_and_manifests_exists() {
    let makefile = read("Makefile");
    let targets: BTreeSet<&str> =
        makefile.lines().filter_map(|l| l.split_once(':').map(|(t, _)| t)).filter(|t| !t.contains(' ')).collect();
    let mut texts = markdown();
    for file in
        ["deploy/chart/values.yaml", "deploy/chart/Chart.yaml", "Dockerfile", "deploy/clusterctl/kustomization.yaml"]
    {
        texts.push((root().join(file), read(file)));
    }
    let mut unknown = Vec::new();
    for (path, text) in &texts {
        for (at, _) in text.match_indices("`make ") {
            let target: String =
                text[at + 6..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-').collect();
            if !targets.contains(target.as_str()) {
                unknown.push(format!("{}: make {target}", path.display()));
            }
        }
    }
    assert!(unknown.is_empty(), "make targets that the Makefile lacks: {unknown:?}");
}

#[test]
fn docs_name_ipaddresses_with_their_group() {
    // Plain `ipaddress` is the built-in networking.k8s.io kind; only a warning saying so may
    // write it.
    let mut bare = Vec::new();
    for (path, text) in markdown() {
        let lines = text.lines().enumerate();
        for (number, line) in lines.filter(|(_, l)| l.contains("kubectl ") && !l.contains("built-in")) {
            let words = line.split(|c: char| c.is_whitespace() || c == ',' || c == '`');
            if words.map(|w| w.split('/').next().unwrap_or(w)).any(|w| w == "ipaddress" || w == "ipaddresses") {
                bare.push(format!("{}:{}: {line}", path.display(), number + 1));
            }
        }
    }
    assert!(bare.is_empty(), "write ipaddresses.ipam.cluster.x-k8s.io:\n{}", bare.join("\n"));
}

#[test]
fn custom_columns_are_quoted_for_every_shell() {
    // Unquoted, `[?(@.type=="Ready")]` is a glob to zsh, and `\"` an escape only bash reads so.
    let mut unquoted = Vec::new();
    for (path, text) in markdown() {
        for (at, _) in text.match_indices("custom-columns=") {
            let next = text[at + 15..].chars().next();
            if next != Some('\'') && !text[at + 15..].starts_with("...") {
                let line = text[at..].lines().next().unwrap_or_default();
                unquoted.push(format!("{}: {line}", path.display()));
            }
        }
    }
    assert!(unquoted.is_empty(), "quote these custom-columns expressions: {unquoted:?}");
}

#[test]
fn the_clusterctl_components_leave_verbosity_to_v_and_document_every_variable() {
    let components = read("deploy/clusterctl/ipam-components.yaml");
    assert!(!components.contains("--log-level"), "--log-level would override the --v cluster-api-operator sets");
    assert!(components.contains("--v=${FERRO_IPAM_VERBOSITY:=0}"), "the components take their verbosity from --v");
    let operations = read("docs/operations.md");
    let config = read("docs/clusterctl.yaml");
    let variables: BTreeSet<&str> =
        components.match_indices("${").filter_map(|(at, _)| components[at + 2..].split(":=").next()).collect();
    assert!(variables.len() >= 3, "{variables:?}");
    for variable in variables {
        assert!(operations.contains(&format!("| `{variable}` |")), "{variable} is not in operations.md's table");
        assert!(config.contains(&format!("# {variable}:")), "{variable} is not in docs/clusterctl.yaml");
    }
}

#[test]
fn sticky_addresses_reserve_nothing_in_help_and_docs() {
    let command = ferro_ipam::cli::Cli::command();
    let flag = command.get_arguments().find(|a| a.get_long() == Some("sticky-address-seconds")).expect("the flag");
    let help = flag.get_help().expect("help text").to_string();
    let row = read("docs/operations.md");
    let row = row.lines().find(|l| l.starts_with("| `--sticky-address-seconds` |")).expect("a row for the flag");
    for (what, text) in [("--help", help.as_str()), ("operations.md", row)] {
        assert!(text.contains("Nothing is reserved"), "{what} must say a memory reserves nothing: {text}");
        assert!(!text.contains("stays reserved") && !text.contains("otherwise full"), "{what}: {text}");
    }
}

#[test]
fn the_quick_start_names_every_crd_of_crds() {
    let quickstart = read("docs/quickstart.md");
    let mut crds = Vec::new();
    for entry in std::fs::read_dir(root().join("crds")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "yaml") {
            crds.push(path.file_stem().unwrap().to_string_lossy().into_owned());
        }
    }
    assert_eq!(crds.len(), 4, "{crds:?}");
    let missing: Vec<_> = crds.iter().filter(|c| !quickstart.contains(&format!("`{c}`"))).collect();
    assert!(missing.is_empty(), "docs/quickstart.md does not name {missing:?}");
}

#[test]
fn helm_installs_into_a_namespace_labelled_beforehand() {
    // `--create-namespace` makes a namespace without the Pod Security label of deploy/.
    let operations = read("docs/operations.md");
    assert!(!operations.contains("--create-namespace\n"), "docs/operations.md installs with --create-namespace");
    let label = "kubectl label namespace ferro-ipam-system pod-security.kubernetes.io/enforce=restricted";
    let namespace: Vec<Value> = serde_saphyr::from_multiple(&read("deploy/base/namespace.yaml")).unwrap();
    assert_eq!(namespace[0]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"], "restricted");
    assert!(operations.contains(label), "docs/operations.md does not label the namespace as deploy/ does");
}

#[test]
fn the_readme_names_every_package_the_make_targets_install() {
    let makefile = read("Makefile");
    let mut packages: BTreeSet<String> = BTreeSet::new();
    for line in makefile.lines() {
        if let Some(rest) = line.split("--no-install-recommends ").nth(1) {
            packages.extend(rest.split([';', ' ', '"']).next().filter(|p| !p.starts_with('$')).map(str::to_owned));
        }
        packages
            .extend(line.split("missing=\"$$missing ").skip(1).filter_map(|r| r.split('"').next()).map(str::to_owned));
    }
    assert!(packages.len() >= 6, "{packages:?}");
    let readme = read("README.md");
    assert!(readme.contains("apt-get"), "README.md does not say that the targets use apt-get");
    let missing: Vec<_> = packages.iter().filter(|p| !readme.contains(&format!("`{p}`"))).collect();
    assert!(missing.is_empty(), "README.md does not name {missing:?}");
}

#[test]
fn the_license_is_the_one_cargo_toml_declares() {
    assert!(read("Cargo.toml").contains("license = \"Apache-2.0\""));
    let license = read("LICENSE");
    assert!(license.trim_start().starts_with("Apache License\n                           Version 2.0, January 2004"));
    assert!(license.contains("END OF TERMS AND CONDITIONS"));
}

/// The Rust sources below `dir`, recursively: path relative to the repository, and text.
fn sources(dir: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(root().join(dir)).unwrap() {
        let path = entry.unwrap().path();
        let relative = path.strip_prefix(root()).unwrap().display().to_string();
        if path.is_dir() {
            found.extend(sources(&relative));
        } else if path.extension().is_some_and(|e| e == "rs") {
            found.push((relative.clone(), read(&relative)));
        }
    }
    found
}

/// The section of operations.md that lists every destructive action.
fn deletes_section() -> String {
    let text = read("docs/operations.md");
    let start = text.find("## What ferro-ipam deletes, and when").expect("operations.md lists what ferro-ipam deletes");
    let rest = &text[start..];
    let end = rest[3..].find("\n## ").map_or(rest.len(), |at| at + 3);
    rest[..end].to_owned()
}

#[test]
fn every_test_the_deletes_table_names_exists() {
    let section = deletes_section();
    let code: Vec<(String, String)> = ["src", "e2e"].iter().flat_map(|dir| sources(dir)).collect();
    let named: BTreeSet<&str> = section
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|word| word.len() > 20 && word.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
        .collect();
    assert!(named.len() >= 15, "the table names {} tests", named.len());
    for test in named {
        let defined = format!("fn {test}(");
        assert!(
            code.iter().any(|(_, text)| text.contains(&defined)),
            "operations.md names the test {test}, which does not exist"
        );
    }
}

#[test]
fn every_delete_and_finalizer_drop_in_src_has_its_row_in_the_deletes_table() {
    // The files that delete or drop a finalizer, each with a phrase of the row that covers it.
    // A new one fails here until the table lists it.
    let covered = [
        ("src/controller/claim/writes.rs", "made again with the same address"),
        ("src/controller/claim/deletion.rs", "then the claim's `ipam.cluster.x-k8s.io/ReleaseAddress` finalizer"),
        ("src/controller/pool/mod.rs", "`ipam.cluster.x-k8s.io/ProtectPool` finalizer"),
        ("src/controller/cluster_vip/mod.rs", "A Cluster's control-plane VIP claim"),
        ("src/controller/cluster_vip/mod.rs", "`ferro-ipam.dev/control-plane-vip` finalizer"),
    ];
    let section = deletes_section();
    for (_, phrase) in covered {
        assert!(section.contains(phrase), "the table has no row for {phrase:?}");
    }
    for (path, text) in sources("src") {
        // An API delete takes a name and parameters; the index's in-memory `delete()` takes none.
        let api_deletes = text.matches(".delete(").count() > text.matches(".delete()").count();
        let destructive = api_deletes || text.contains("without_finalizer(");
        let exempt = path.ends_with("finalizers.rs") || path.ends_with("_tests.rs");
        if destructive && !exempt {
            assert!(
                covered.iter().any(|(file, _)| *file == path),
                "{path} deletes or drops a finalizer: give it a row in docs/operations.md, what ferro-ipam deletes"
            );
        }
    }
}
