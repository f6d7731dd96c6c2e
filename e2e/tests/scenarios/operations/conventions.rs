//! Cluster API's conventions for a provider's files: the `cluster.x-k8s.io/provider` label on
//! every component, and the files that clusterctl's local-repository script and CAPI's Tilt setup
//! read from a provider repository.

use ferro_ipam_e2e::ControlPlane;
use ferro_ipam_e2e::plane::repo_root;
use serde_json::Value;

use super::{deploy, kustomize, kustomize_text, yaml_documents};

/// clusterctl's name of ferro-ipam: `<provider type>-<name>`.
const PROVIDER_LABEL: &str = "ipam-ferro-ipam";

#[test]
fn every_component_carries_clusterctls_provider_label() {
    let plane = ControlPlane::shared();
    for dir in ["", "with-monitoring", "clusterctl", "single-namespace"] {
        let objects = kustomize(plane, &deploy(dir));
        assert!(objects.len() > 10, "deploy/{dir} builds {} objects", objects.len());
        for object in &objects {
            assert_eq!(
                object["metadata"]["labels"]["cluster.x-k8s.io/provider"], PROVIDER_LABEL,
                "deploy/{dir}: {} {} lacks the label",
                object["kind"], object["metadata"]["name"]
            );
        }
    }
}

fn json_file(name: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(repo_root().join(name)).unwrap()).unwrap()
}

#[test]
fn clusterctl_settings_and_tilt_provider_point_at_the_release_files() {
    let plane = ControlPlane::shared();
    // cluster-api's hack/create-local-repository.py: `name` is the provider label, the components
    // are `kustomize build <configFolder>`, metadata.yaml sits at the repository's root, and
    // `nextVersion` needs a release series there.
    let settings = json_file("clusterctl-settings.json");
    assert_eq!(settings["name"], PROVIDER_LABEL);
    let config = &settings["config"];
    assert_eq!(config["componentsFile"], "ipam-components.yaml");
    let folder = config["configFolder"].as_str().unwrap();
    let built = kustomize_text(plane, &repo_root().join(folder));
    let committed = std::fs::read_to_string(repo_root().join(folder).join("ipam-components.yaml")).unwrap();
    assert!(built == committed, "{folder} builds what the release publishes as ipam-components.yaml");
    let next = config["nextVersion"].as_str().unwrap().trim_start_matches('v');
    let mut parts = next.split('.').map(|p| p.parse::<u64>().unwrap());
    let (major, minor) = (parts.next().unwrap(), parts.next().unwrap());
    let metadata = &yaml_documents(&std::fs::read_to_string(repo_root().join("metadata.yaml")).unwrap())[0];
    let series = metadata["releaseSeries"].as_array().unwrap();
    assert!(series.iter().any(|s| s["major"] == major && s["minor"] == minor), "no series for {next}: {series:?}");

    // cluster-api's Tiltfile: without `image` it builds nothing and applies the kustomize folder,
    // whose Deployment it finds by the provider label.
    let tilt = &yaml_documents(&std::fs::read_to_string(repo_root().join("tilt-provider.yaml")).unwrap())[0];
    assert_eq!(tilt["name"], "ferro-ipam");
    assert!(tilt["config"]["image"].is_null(), "Tilt would `go build` a provider with an image");
    let objects = kustomize(plane, &repo_root().join(tilt["config"]["kustomize_folder"].as_str().unwrap()));
    assert!(
        objects.iter().any(
            |o| o["kind"] == "Deployment" && o["metadata"]["labels"]["cluster.x-k8s.io/provider"] == PROVIDER_LABEL
        )
    );
}
