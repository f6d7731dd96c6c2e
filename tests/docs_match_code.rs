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
    let install = read("docs/install.md");
    let config = read("docs/clusterctl.yaml");
    let variables: BTreeSet<&str> =
        components.match_indices("${").filter_map(|(at, _)| components[at + 2..].split(":=").next()).collect();
    assert!(variables.len() >= 3, "{variables:?}");
    for variable in variables {
        assert!(install.contains(&format!("| `{variable}` |")), "{variable} is not in install.md's table");
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
    assert_eq!(crds.len(), 5, "{crds:?}");
    let missing: Vec<_> = crds.iter().filter(|c| !quickstart.contains(&format!("`{c}`"))).collect();
    assert!(missing.is_empty(), "docs/quickstart.md does not name {missing:?}");
}

#[test]
fn helm_installs_into_a_namespace_labelled_beforehand() {
    // `--create-namespace` makes a namespace without the Pod Security label of deploy/.
    let install = read("docs/install.md");
    assert!(!install.contains("--create-namespace\n"), "docs/install.md installs with --create-namespace");
    let label = "kubectl label namespace ferro-ipam-system pod-security.kubernetes.io/enforce=restricted";
    let namespace: Vec<Value> = serde_saphyr::from_multiple(&read("deploy/base/namespace.yaml")).unwrap();
    assert_eq!(namespace[0]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"], "restricted");
    assert!(install.contains(label), "docs/install.md does not label the namespace as deploy/ does");
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

/// The section of `file` under `heading` (a `## ` heading), up to the next such heading.
fn section(file: &str, heading: &str) -> String {
    let text = read(file);
    let start = text.find(heading).unwrap_or_else(|| panic!("{file} has no {heading:?}"));
    let rest = &text[start..];
    let end = rest[3..].find("\n## ").map_or(rest.len(), |at| at + 3);
    rest[..end].to_owned()
}

/// The section of operations.md that lists every destructive action.
fn deletes_section() -> String {
    section("docs/operations.md", "## What ferro-ipam deletes, and when")
}

/// Every test `text` (of `page`) names in a code span exists in src/, e2e/ or tests/; at least
/// `at_least` are named.
fn assert_named_tests_exist(page: &str, text: &str, at_least: usize) {
    let code: Vec<(String, String)> = ["src", "e2e", "tests"].iter().flat_map(|dir| sources(dir)).collect();
    let named: BTreeSet<&str> = text
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|word| word.len() > 20 && word.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
        .collect();
    assert!(named.len() >= at_least, "{page} names {} tests", named.len());
    for test in named {
        let defined = format!("fn {test}(");
        assert!(
            code.iter().any(|(_, text)| text.contains(&defined)),
            "{page} names the test {test}, which does not exist"
        );
    }
}

#[test]
fn every_test_the_deletes_table_names_exists() {
    assert_named_tests_exist("operations.md", &deletes_section(), 15);
}

#[test]
fn every_test_the_threat_model_names_exists() {
    assert_named_tests_exist("security.md", &read("docs/security.md"), 15);
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
        ("src/controller/hub/spoke/session.rs", "A spoke's `AddressBlock` in the hub (a block returned)"),
        ("src/inspect/drain.rs", "by `ferro-ipam hub drain`"),
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

/// The body of the function whose signature starts with `signature` in `text`, up to the first
/// line that closes a top-level item.
fn function_body<'a>(text: &'a str, signature: &str) -> &'a str {
    let start = text.find(signature).unwrap_or_else(|| panic!("no {signature}"));
    let rest = &text[start..];
    &rest[..rest.find("\n}\n").unwrap_or(rest.len())]
}

/// The text between `start` and the next `end` after it in `text`.
fn between<'a>(text: &'a str, start: &str, end: &str) -> &'a str {
    let from = text.find(start).unwrap_or_else(|| panic!("no {start:?} in {text:?}")) + start.len();
    let to = text[from..].find(end).unwrap_or_else(|| panic!("no {end:?} after {start:?}"));
    &text[from..from + to]
}

/// The lines of `text` from the first that starts with `first` up to the next that starts with
/// `next`, joined by spaces.
fn lines_from(text: &str, first: &str, next: &str) -> String {
    let mut lines = text.lines().skip_while(|l| !l.starts_with(first));
    let head = lines.next().unwrap_or_else(|| panic!("no line starting with {first:?}"));
    let lines = std::iter::once(head).chain(lines.take_while(|l| !l.starts_with(next)));
    lines.flat_map(str::split_whitespace).collect::<Vec<_>>().join(" ")
}

/// How many pool CRDs `crds/` holds.
/// The pool CRDs of crds/: those of the pools' API group (the other is `AddressBlock`).
fn pool_kinds() -> usize {
    std::fs::read_dir(root().join("crds"))
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().to_string_lossy().ends_with(".ipam.cluster.x-k8s.io.yaml"))
        .count()
}

const NUMBERS: [&str; 8] = ["no", "one", "two", "three", "four", "five", "six", "seven"];

#[test]
fn every_variable_a_documented_test_command_sets_is_read_by_the_code() {
    // `NAME=value cargo test ...`: a variable no test reads changes nothing, silently.
    let code: String = ["src", "e2e"].iter().flat_map(|dir| sources(dir)).map(|(_, text)| text).collect();
    let (mut set, mut unread) = (0, Vec::new());
    for (path, text) in markdown() {
        for line in text.lines().filter(|l| l.contains("cargo test")) {
            for word in line.split(|c: char| c.is_whitespace() || c == '`') {
                let Some((name, _)) = word.split_once('=') else { continue };
                let variable = !name.is_empty() && name.chars().all(|c| c.is_ascii_uppercase() || c == '_');
                if !variable || ["RUST_", "CARGO_", "PROPTEST_"].iter().any(|p| name.starts_with(p)) {
                    continue;
                }
                set += 1;
                if !code.contains(&format!("\"{name}\"")) {
                    unread.push(format!("{}: {name}", path.display()));
                }
            }
        }
    }
    assert!(set >= 1, "no documented test command sets a variable");
    assert!(unread.is_empty(), "variables set for tests that no code reads: {unread:?}");
}

#[test]
fn a_stand_by_is_ready_only_once_its_first_attempt_found_the_lease_held() {
    // The code: a replica starts unsettled, and only a settled stand-by is ready without serving.
    let leader = read("src/run/leader.rs");
    assert!(leader.contains("watch::channel(Leadership::Starting)"), "a replica no longer starts unsettled");
    let ready = function_body(&read("src/run/mod.rs"), "fn ready_standing_by(").to_owned();
    assert!(ready.contains("Leadership::Standby"), "{ready}");
    assert!(!ready.contains("Leadership::Starting"), "an unsettled replica is ready now: change the docs: {ready}");

    let quickstart = read("docs/quickstart.md");
    let bullet = lines_from(&quickstart, "- `/readyz` answers", "- ");
    assert!(bullet.contains("first attempt at the Lease"), "docs/quickstart.md: {bullet}");
    let deployment = read("deploy/base/deployment.yaml");
    let probe = between(&deployment, "readinessProbe:", "httpGet:").split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(probe.contains("first attempt at the lease"), "deploy/base/deployment.yaml: {probe}");
    for (path, text) in markdown() {
        for line in text.lines().filter(|l| l.contains("/readyz") && l.contains("at once")) {
            assert!(!line.contains("stand"), "{}: a stand-by is not ready at once: {line}", path.display());
        }
    }
}

#[test]
fn missing_cluster_api_crds_are_an_error_retried_with_a_backoff() {
    let discovery = read("src/client/discovery.rs");
    let retry = function_body(&discovery, "pub(crate) async fn versions_eventually(");
    assert!(retry.contains("loop {") && retry.contains("misconfig.report("), "discovery no longer retries: {retry}");
    let cap = between(retry, ".min(Duration::from_secs(", "))");
    assert!(read("src/misconfig/mod.rs").contains("error!(?problem"), "a misconfiguration is no longer an ERROR");
    assert!(read("src/misconfig/problem.rs").contains("Problem::crd_missing"));

    let quickstart = read("docs/quickstart.md");
    let bullet = lines_from(&quickstart, "- **Cluster API must already be installed.**", "- ");
    let reference = read("docs/api-reference.md");
    let paragraph = between(&reference, "If neither is served", "It picks the").split_whitespace().collect::<Vec<_>>();
    let paragraph = paragraph.join(" ");
    for (doc, text) in [("quickstart.md", bullet.as_str()), ("api-reference.md", paragraph.as_str())] {
        assert!(text.contains("ERROR (`problem=crd_missing`)"), "{doc}: {text}");
        assert!(text.contains("503"), "{doc} does not say /readyz answers 503: {text}");
        assert!(text.contains(&format!("backoff of up to {cap} s")), "{doc}: the backoff is capped at {cap} s: {text}");
        assert!(!text.to_lowercase().contains("warning"), "{doc}: it is an ERROR, not a warning: {text}");
    }
    assert!(paragraph.contains("does not exit"), "api-reference.md: {paragraph}");
}

#[test]
fn docs_count_the_pool_kinds_of_crds() {
    let right = NUMBERS[pool_kinds()];
    let mut wrong = Vec::new();
    for (path, text) in markdown() {
        let text = text.to_lowercase().replace('\n', " ");
        let mut phrases = vec!["both pool kinds".to_owned(), "both pool crds".to_owned(), "both crds".to_owned()];
        for number in NUMBERS.iter().filter(|n| **n != right) {
            phrases.extend([format!("{number} pool kinds"), format!("{number} pool crds")]);
        }
        wrong.extend(phrases.into_iter().filter(|p| text.contains(p)).map(|p| format!("{}: {p}", path.display())));
    }
    assert!(wrong.is_empty(), "crds/ holds {right} pool kinds: {wrong:?}");
}

#[test]
fn the_pool_not_ready_cases_of_the_code_are_the_docs_cases() {
    // (file, what the code says in that case, what each doc's row says of it).
    let cases = [
        ("src/controller/claim/loaded.rs", "not found\"", "not found"),
        ("src/controller/claim/loaded.rs", "is being deleted\"", "being deleted"),
        ("src/contract/reasons.rs", "AllocError::PoolInvalid(_) => ClaimReason::PoolNotReady", "invalid"),
        ("src/controller/claim/loaded.rs", "this ferro-ipam runs with --namespace", "--namespace"),
        ("src/controller/claim/holds.rs", "no_pool_message(", "purpose"),
    ];
    for (file, code, _) in cases {
        assert!(read(file).contains(code), "{file} no longer has the case {code:?}: update this list and the docs");
    }
    // Any other place that gives the reason is a case this list does not know.
    let givers: BTreeSet<String> = sources("src")
        .into_iter()
        .filter(|(path, text)| {
            let code = text.split("#[cfg(test)]").next().unwrap_or_default();
            code.contains("ClaimReason::PoolNotReady")
                && !path.contains("test")
                && !path.starts_with("src/api/")
                && !path.starts_with("src/preflight/")
        })
        .map(|(path, _)| path)
        .collect();
    let known: BTreeSet<String> = cases.iter().map(|(file, _, _)| file.to_string()).collect();
    assert!(givers.is_subset(&known), "PoolNotReady is also given by {:?}", givers.difference(&known));

    let count = NUMBERS[cases.len()];
    for (file, row_start) in [
        ("docs/quickstart.md", "| `PoolNotReady` |"),
        ("docs/troubleshooting.md", "| `PoolNotReady` |"),
        ("docs/api-reference.md", "| False | `PoolNotReady` |"),
    ] {
        let doc = read(file);
        let row =
            doc.lines().find(|l| l.starts_with(row_start)).unwrap_or_else(|| panic!("no PoolNotReady row in {file}"));
        assert!(row.contains(&format!("of {count} cases")), "{file} must give {count} cases: {row}");
        for (_, _, said) in cases {
            assert!(row.contains(said), "{file}'s PoolNotReady row does not name the case {said:?}: {row}");
        }
    }
}

#[test]
fn top_reads_the_metrics_endpoint_when_given_metrics() {
    let command = ferro_ipam::cli::Cli::command();
    let top = command.find_subcommand("top").expect("the top command");
    assert!(top.get_arguments().any(|a| a.get_long() == Some("metrics")), "top has no --metrics");
    let doc = read("docs/who-has-and-top.md");
    assert!(doc.contains("With `--metrics`, it also reads the leading replica's metrics endpoint"));
    let flat = doc.replace('\n', " ");
    for denial in ["does not read the metrics", "never reads the metrics", "not the metrics endpoint"] {
        assert!(!flat.contains(denial), "docs/who-has-and-top.md: {denial:?}");
    }
}

#[test]
fn the_control_planes_cold_build_is_given_one_time_and_size() {
    let script = read("e2e/tools/build.sh");
    let line = script.lines().find(|l| l.contains("a cold build")).expect("build.sh's estimate");
    let (low, high) = between(line, "takes ", " minutes").split_once('-').expect("a range of minutes");
    let total = between(line, "(~", " in all)");
    let minutes = format!("{low} to {high} minutes");
    for file in ["README.md", "docs/quickstart.md", "docs/development.md"] {
        let text = read(file).replace('\n', " ");
        assert!(text.contains(&minutes), "{file} does not give {minutes}, as e2e/tools/build.sh does");
        assert!(text.contains(&format!("about {total}")), "{file} does not give about {total}, as build.sh does");
        for sentence in text.split(". ").filter(|s| s.contains("cold build") || s.contains("control plane's Go build"))
        {
            assert!(!sentence.contains("minutes") || sentence.contains(&minutes), "{file}: {sentence}");
            let sizes = sentence.match_indices("about ").map(|(at, _)| &sentence[at + 6..]);
            for size in sizes.filter_map(|s| s.split_once(" GB").map(|(n, _)| n)).filter(|n| !n.contains(' ')) {
                assert_eq!(format!("{size} GB"), total, "{file}: {sentence}");
            }
        }
    }
}

#[test]
fn preflights_address_count_is_documented_with_the_sub_prefixes() {
    // summary.addresses: every IPAddress of a pool of the four kinds (preflight's own test pins
    // the counting down), the prefix pools' sub-prefixes included.
    let analyse = read("src/preflight/analyse.rs");
    assert!(analyse.contains("addresses: inventory.addresses.len().saturating_sub(features.other_addresses)"));
    let migration = read("docs/migration.md");
    let row = migration.lines().find(|l| l.starts_with("| `summary` |")).expect("the summary row");
    let addresses = between(row, "`addresses` (", ")");
    assert!(addresses.contains("sub-prefixes of prefix pools count too"), "{addresses}");
    assert!(migration.contains("not the migration test's fleet"), "the sample report is an illustration");
}

#[test]
fn the_soaks_run_time_is_the_range_its_table_shows() {
    let soak = read("docs/soak.md");
    let end = soak.find(" s in three runs of seed 2323").expect("the run time of a 3-minute run");
    let range = &soak[soak[..end].rfind('(').expect("(LOW to HIGH") + 1..end];
    let (low, high) = range.split_once(" to ").expect("LOW to HIGH");
    let table = &soak[soak.find("| test's own time |").expect("the VIP runs' table")..];
    let times: Vec<u32> = table
        .lines()
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| l.trim_end_matches('|').rsplit('|').next().unwrap().trim().trim_end_matches(" s").parse().unwrap())
        .collect();
    assert_eq!(times.len(), 3, "three runs: {times:?}");
    let (min, max) = (times.iter().min().unwrap(), times.iter().max().unwrap());
    assert_eq!((low.parse::<u32>().unwrap(), high.parse::<u32>().unwrap()), (*min, *max), "docs/soak.md's range");
}

#[test]
fn the_memory_per_pool_follows_from_the_benchmarks() {
    let benchmarks = read("docs/benchmarks.md");
    let idle: f64 =
        between(&benchmarks, "idle RSS (100 pools, no claims, 2 s after /readyz): ", " MiB").parse().unwrap();
    let row = benchmarks
        .lines()
        .find(|l| l.starts_with("| addresses | 10000 | 10000 | 0 | ferro-ipam |"))
        .expect("the 10,000 pools run");
    let peak = row.split('|').map(str::trim).find(|c| c.ends_with(" MiB")).expect("its peak RSS");
    let peak: f64 = peak.trim_end_matches(" MiB").parse().unwrap();
    let per_pool = (peak - idle) * 1024.0 * 1024.0 / 10_000.0 / 1000.0;
    let sizing = read("docs/sizing.md");
    let said =
        format!("| each pool with one claim, at 10,000 pools | about {per_pool:.1} KB ({peak} MiB at the peak) |");
    assert!(sizing.contains(&said), "docs/sizing.md should say: {said}");
    let idle_row = format!("| the process, idle, 100 empty pools | about {} MiB |", idle.round());
    assert!(sizing.contains(&idle_row), "the idle figure of benchmarks.md: {idle_row}");
}

#[test]
fn the_rbac_files_the_remedies_name_define_the_roles_they_name() {
    let problems = read("src/misconfig/problem.rs");
    let mut named = 0;
    for (at, _) in problems.match_indices("bind the ") {
        let rest = &problems[at + 9..];
        let (kind, rest) = rest.split_once(" of ").expect("bind the KIND of FILE");
        let file = rest.split([' ', ';', '"']).next().unwrap();
        let objects: Vec<Value> = serde_saphyr::from_multiple(&read(file)).unwrap();
        assert!(objects.iter().any(|o| o["kind"] == kind), "{file} defines no {kind}, as problem.rs says");
        named += 1;
    }
    assert!(named >= 2, "{named}");
}

#[test]
fn uninstalling_deletes_the_monitoring_objects_too() {
    let component: Value = serde_saphyr::from_str(&read("deploy/monitoring/kustomization.yaml")).unwrap();
    let files: Vec<&str> = component["resources"].as_array().unwrap().iter().map(|r| r.as_str().unwrap()).collect();
    assert!(files.len() >= 2, "{files:?}");
    let uninstall = section("docs/upgrade-and-uninstall.md", "## Uninstall");
    let delete = uninstall.lines().find(|l| l.starts_with("kubectl delete -f deploy/monitoring/")).expect("a delete");
    for file in files {
        assert!(delete.contains(&format!("-f deploy/monitoring/{file}")), "the uninstall leaves {file}: {delete}");
    }
    // deploy/with-monitoring holds the CRDs: deleting it deletes every pool, as the page warns.
    let with: Value = serde_saphyr::from_str(&read("deploy/with-monitoring/kustomization.yaml")).unwrap();
    assert!(with["resources"].as_array().unwrap().iter().any(|r| r == "../base"));
    assert!(read("deploy/base/kustomization.yaml").contains("- ../../crds"));
    assert!(uninstall.contains("`kubectl delete -k deploy/with-monitoring` would remove them, but it holds the CRDs"));
}
