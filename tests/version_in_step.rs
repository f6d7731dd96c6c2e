//! One version everywhere: Cargo.toml's `[package] version` is the one the chart, clusterctl's
//! metadata, the kustomize image tag and every command of the docs that names a release use.
//! Bumping it without the others fails here, naming the file and the value. Pure file reading.

use std::path::{Path, PathBuf};

use serde_json::Value;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

fn yaml(path: &str) -> Value {
    serde_saphyr::from_str(&read(Path::new(path))).unwrap_or_else(|e| panic!("parsing {path}: {e}"))
}

/// Cargo.toml's `[package] version`, the one the binary reports.
fn cargo_version() -> String {
    let manifest = read(Path::new("Cargo.toml"));
    let package = &manifest[manifest.find("[package]").expect("a [package] table")..];
    let line = package.lines().find(|l| l.starts_with("version")).expect("a version in [package]");
    line.split('"').nth(1).expect("a quoted version").to_owned()
}

/// `major.minor` of a version.
fn series(version: &str) -> String {
    version.rsplit_once('.').expect("major.minor.patch").0.to_owned()
}

/// A release version (`1.2.3`) at the start of `text`, if there is one.
fn version_at(text: &str) -> Option<&str> {
    let end = text.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(text.len());
    let candidate = text[..end].trim_end_matches('.');
    let parts: Vec<&str> = candidate.split('.').collect();
    (parts.len() == 3 && parts.iter().all(|p| !p.is_empty())).then_some(candidate)
}

/// What names a release of ferro-ipam in a command or a manifest, each followed by its version.
const MARKERS: [&str; 7] = [
    "ferro-ipam:v",        // the image: ghcr.io/ferro-ipam/ferro-ipam:v1.2.3, --ipam ferro-ipam:v1.2.3
    "?ref=v",              // a kustomize remote base at a tag
    "releases/download/v", // a release's files on the forge
    "ipam-ferro-ipam/v",   // a clusterctl repository's version directory
    "ferro-ipam-image-v",  // dist/'s image tarball
    "ferro-ipam-v",        // make image's tarball, target/image/ferro-ipam-v1.2.3.tar
    "ferro-ipam-",         // the packaged chart, ferro-ipam-1.2.3.tgz
];

/// `file:line: value` for every release named in `text` that is not `version`.
fn other_versions(file: &Path, text: &str, version: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (number, line) in text.lines().enumerate() {
        for marker in MARKERS {
            for (at, _) in line.match_indices(marker) {
                let named = version_at(&line[at + marker.len()..]);
                if let Some(named) = named.filter(|n| *n != version) {
                    found.push(format!("{}:{}: {marker}{named}", file.display(), number + 1));
                }
            }
        }
    }
    found
}

/// The files whose commands or manifests may name a release: README.md, RELEASING.md, docs/
/// (its Markdown, clusterctl.yaml and examples) and deploy/'s YAML.
fn files_naming_releases() -> Vec<PathBuf> {
    let mut files =
        vec![PathBuf::from("README.md"), PathBuf::from("RELEASING.md"), PathBuf::from("docs/clusterctl.yaml")];
    let listed = |dir: &str, extension: &str| -> Vec<PathBuf> {
        let entries = std::fs::read_dir(root().join(dir)).unwrap_or_else(|e| panic!("listing {dir}: {e}"));
        let paths = entries.map(|e| e.unwrap().path());
        paths
            .filter(|p| p.extension().is_some_and(|e| e == extension))
            .map(|p| p.strip_prefix(root()).unwrap().to_owned())
            .collect()
    };
    files.extend(listed("docs", "md"));
    files.extend(listed("docs/examples", "yaml"));
    for dir in ["deploy/base", "deploy/clusterctl", "deploy/chart/files"] {
        files.extend(listed(dir, "yaml"));
    }
    files.retain(|f| root().join(f).exists());
    files
}

#[test]
fn the_chart_is_versioned_as_cargo_toml() {
    let version = cargo_version();
    let chart = yaml("deploy/chart/Chart.yaml");
    assert_eq!(chart["version"], version.as_str(), "deploy/chart/Chart.yaml version; Cargo.toml says {version}");
    assert_eq!(
        chart["appVersion"],
        format!("v{version}").as_str(),
        "deploy/chart/Chart.yaml appVersion; Cargo.toml says {version}"
    );
}

#[test]
fn clusterctl_metadata_has_the_release_series_of_cargo_toml() {
    let version = cargo_version();
    let metadata = yaml("metadata.yaml");
    let listed: Vec<String> = metadata["releaseSeries"]
        .as_array()
        .expect("metadata.yaml: releaseSeries")
        .iter()
        .map(|s| format!("{}.{}", s["major"], s["minor"]))
        .collect();
    assert!(
        listed.contains(&series(&version)),
        "metadata.yaml's releaseSeries {listed:?} lacks {}, Cargo.toml's version {version}",
        series(&version)
    );
    let settings: Value = serde_json::from_str(&read(Path::new("clusterctl-settings.json"))).unwrap();
    let next = settings["config"]["nextVersion"].as_str().expect("clusterctl-settings.json: nextVersion");
    assert_eq!(
        series(next.trim_start_matches('v')),
        series(&version),
        "clusterctl-settings.json nextVersion {next} is not in Cargo.toml's release series ({version})"
    );
}

#[test]
fn the_kustomize_image_tag_is_cargo_tomls_version() {
    let version = cargo_version();
    let base = yaml("deploy/base/kustomization.yaml");
    let images = base["images"].as_array().expect("deploy/base/kustomization.yaml: images");
    let ours = images.iter().find(|i| i["name"] == "ferro-ipam").expect("an images entry for ferro-ipam");
    assert_eq!(
        ours["newTag"],
        format!("v{version}").as_str(),
        "deploy/base/kustomization.yaml newTag; Cargo.toml says {version}"
    );
}

#[test]
fn every_release_the_docs_and_manifests_name_is_cargo_tomls() {
    let version = cargo_version();
    let files = files_naming_releases();
    assert!(files.len() >= 15, "{files:?}");
    let mut others = Vec::new();
    let mut named = 0;
    for file in &files {
        let text = read(file);
        named += MARKERS.iter().map(|m| text.matches(m).count()).sum::<usize>();
        others.extend(other_versions(file, &text, &version));
    }
    assert!(named >= 10, "the docs and manifests name a release only {named} times: is the scan still looking?");
    assert!(others.is_empty(), "releases other than Cargo.toml's {version}:\n{}", others.join("\n"));
}

#[test]
fn a_release_named_in_a_command_is_found_with_its_place() {
    let text = "kubectl apply -k https://example.com/ferro-ipam//deploy?ref=v0.0.9\n\
                helm install x dist/ferro-ipam-0.1.0.tgz\n\
                HT_BIN=/work/bins/ferro-ipam-8dfb102 crane push ferro-ipam-image-v1.2.3.tar r/ferro-ipam:v0.1.0-amd64\n";
    let found = other_versions(Path::new("doc.md"), text, "0.1.0");
    assert_eq!(found, ["doc.md:1: ?ref=v0.0.9", "doc.md:3: ferro-ipam-image-v1.2.3"]);
}
