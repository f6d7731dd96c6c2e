//! A release's files, as `make dist` writes them: `$FERRO_IPAM_DIST`, else `<repo>/dist`
//! (`make test-node` makes one from the checkout). Its image is the only ferro-ipam image in the
//! node's containerd, loaded the way docs/install-from-release.md tells users to load a mirrored
//! image; every install from these files must run it by the digest of the release's `.digest`
//! file, and `deploy/` runs it by tag.

use std::path::PathBuf;
use std::sync::OnceLock;

use ferro_ipam_e2e::cluster::Cluster;
use ferro_ipam_e2e::gotools::VERSION;
use ferro_ipam_e2e::plane::repo_root;
use serde_json::Value;

use super::{IMAGE, pod_name};

pub struct Release {
    dir: PathBuf,
    /// `sha256:...`, from `ferro-ipam-image-<version>.digest`.
    pub digest: String,
}

/// The release's files.
pub fn release() -> &'static Release {
    static RELEASE: OnceLock<Release> = OnceLock::new();
    RELEASE.get_or_init(|| {
        let dir = std::env::var("FERRO_IPAM_DIST").map(PathBuf::from).unwrap_or_else(|_| repo_root().join("dist"));
        let digest_file = dir.join(format!("ferro-ipam-image-{VERSION}.digest"));
        let digest = std::fs::read_to_string(&digest_file)
            .unwrap_or_else(|e| panic!("reading {} ({e}): run `make dist` first", digest_file.display()))
            .trim()
            .to_owned();
        assert!(
            digest.starts_with("sha256:") && digest.len() == 71,
            "{}: not a digest: {digest}",
            digest_file.display()
        );
        Release { dir, digest }
    })
}

impl Release {
    /// One of the release's files; panics when it is missing.
    pub fn file(&self, name: &str) -> PathBuf {
        let path = self.dir.join(name);
        assert!(path.is_file(), "{} is missing: run `make dist` first", path.display());
        path
    }

    pub fn install_yaml(&self) -> PathBuf {
        self.file("install.yaml")
    }

    /// The Helm chart, `ferro-ipam-<version without v>.tgz`.
    pub fn chart(&self) -> PathBuf {
        self.file(&format!("ferro-ipam-{}.tgz", env!("CARGO_PKG_VERSION")))
    }

    /// `repository@sha256:...`: the name every manifest of the release gives the image.
    pub fn image(&self) -> String {
        let (repository, _tag) = IMAGE.rsplit_once(':').expect("IMAGE has a tag");
        format!("{repository}@{}", self.digest)
    }

    /// docs/install-from-release.md's "The image on your nodes": `ctr -n k8s.io images import`
    /// of the archive, then `ctr -n k8s.io images tag` of its tag to the by-digest name. The
    /// image's tag is [`IMAGE`], which `deploy/` names.
    pub fn import_image(&self, cluster: &Cluster) {
        let archive = self.file(&format!("ferro-ipam-image-{VERSION}.tar"));
        let by_digest = self.image();
        cluster
            .ctr(&["images", "import", &archive.to_string_lossy()])
            .unwrap_or_else(|e| panic!("importing {} into the node: {e:#}", archive.display()));
        cluster
            .ctr(&["images", "tag", IMAGE, &by_digest])
            .unwrap_or_else(|e| panic!("tagging {IMAGE} as {by_digest} in the node: {e:#}"));
    }

    /// Every container of these pods is the release's image: named by its digest in the pod's
    /// spec, and run from it (the status's imageID).
    pub fn assert_runs_image(&self, step: &str, pods: &[Value]) {
        assert!(!pods.is_empty(), "{step}: no pods");
        let image = self.image();
        for pod in pods {
            let name = pod_name(pod);
            let specs = pod["spec"]["containers"].as_array().cloned().unwrap_or_default();
            for container in &specs {
                assert_eq!(container["image"], image.as_str(), "{step}: the image of {name}'s {}", container["name"]);
            }
            let statuses = pod["status"]["containerStatuses"].as_array().cloned().unwrap_or_default();
            assert_eq!(statuses.len(), specs.len(), "{step}: the container statuses of {name}");
            for status in &statuses {
                let id = status["imageID"].as_str().unwrap_or_default();
                assert!(
                    id.ends_with(&self.digest),
                    "{step}: {name}'s {} runs {id}, not the release's {}",
                    status["name"],
                    self.digest
                );
            }
        }
    }
}
