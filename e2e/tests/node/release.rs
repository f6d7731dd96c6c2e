//! A release's files, as `make dist` writes them: `$FERRO_IPAM_DIST`, else `<repo>/dist`
//! (`make test-node` makes one from the checkout), and the previous release's,
//! `$FERRO_IPAM_PREVIOUS_DIST` (`make previous-dist`, e2e/tools/previous-release.sh). Their
//! images are the only ferro-ipam images in the node's containerd, loaded the way
//! docs/install-from-release.md tells users to load a mirrored image; every install from a
//! release's files must run its image by the digest of its `.digest` file, and `deploy/` runs the
//! current one by tag.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use ferro_ipam_e2e::cluster::Cluster;
use ferro_ipam_e2e::plane::repo_root;
use serde_json::Value;

use super::{IMAGE, pod_name};

pub struct Release {
    dir: PathBuf,
    /// Cargo's version, without the `v` of its tags: `0.1.0`.
    pub version: String,
    /// `sha256:...`, from `ferro-ipam-image-v<version>.digest`.
    pub digest: String,
}

/// The release's files.
pub fn release() -> &'static Release {
    static RELEASE: OnceLock<Release> = OnceLock::new();
    RELEASE.get_or_init(|| {
        let dir = std::env::var("FERRO_IPAM_DIST").map(PathBuf::from).unwrap_or_else(|_| repo_root().join("dist"));
        Release::at(dir, env!("CARGO_PKG_VERSION"))
    })
}

/// The previous release's files, its version read from the name of its image's digest file.
pub fn previous_release() -> &'static Release {
    static PREVIOUS: OnceLock<Release> = OnceLock::new();
    PREVIOUS.get_or_init(|| {
        let dir = std::env::var("FERRO_IPAM_PREVIOUS_DIST").map(PathBuf::from).unwrap_or_else(|_| {
            panic!("FERRO_IPAM_PREVIOUS_DIST is not set: `make previous-dist` builds the previous release's files")
        });
        let version = digest_file_version(&dir)
            .unwrap_or_else(|| panic!("{} holds no ferro-ipam-image-v<version>.digest", dir.display()));
        Release::at(dir, &version)
    })
}

/// The version in the name of the one `ferro-ipam-image-v<version>.digest` of `dir`.
fn digest_file_version(dir: &Path) -> Option<String> {
    std::fs::read_dir(dir).ok()?.find_map(|entry| {
        let name = entry.ok()?.file_name().into_string().ok()?;
        Some(name.strip_prefix("ferro-ipam-image-v")?.strip_suffix(".digest")?.to_owned())
    })
}

impl Release {
    fn at(dir: PathBuf, version: &str) -> Release {
        let digest_file = dir.join(format!("ferro-ipam-image-v{version}.digest"));
        let digest = std::fs::read_to_string(&digest_file)
            .unwrap_or_else(|e| panic!("reading {} ({e}): run `make dist` first", digest_file.display()))
            .trim()
            .to_owned();
        assert!(
            digest.starts_with("sha256:") && digest.len() == 71,
            "{}: not a digest: {digest}",
            digest_file.display()
        );
        Release { dir, version: version.to_owned(), digest }
    }

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
        self.file(&format!("ferro-ipam-{}.tgz", self.version))
    }

    /// `repository@sha256:...`: the name every manifest of the release gives the image.
    pub fn image(&self) -> String {
        format!("{}@{}", repository(), self.digest)
    }

    /// The tag its image archive gives the image, `repository:v<version>`.
    fn tag(&self) -> String {
        format!("{}:v{}", repository(), self.version)
    }

    /// docs/install-from-release.md's "The image on your nodes": `ctr -n k8s.io images import`
    /// of the archive, then `ctr -n k8s.io images tag` of its tag to the by-digest name. The
    /// current release's tag is [`IMAGE`], which `deploy/` names.
    pub fn import_image(&self, cluster: &Cluster) {
        let archive = self.file(&format!("ferro-ipam-image-v{}.tar", self.version));
        let by_digest = self.image();
        let tag = self.tag();
        cluster
            .ctr(&["images", "import", &archive.to_string_lossy()])
            .unwrap_or_else(|e| panic!("importing {} into the node: {e:#}", archive.display()));
        cluster
            .ctr(&["images", "tag", &tag, &by_digest])
            .unwrap_or_else(|e| panic!("tagging {tag} as {by_digest} in the node: {e:#}"));
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

/// The repository every release names its image in: [`IMAGE`]'s.
fn repository() -> &'static str {
    IMAGE.rsplit_once(':').expect("IMAGE has a tag").0
}
