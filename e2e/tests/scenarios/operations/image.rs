//! The image `make image` builds: its configuration (user, entrypoint, labels, platform), its
//! root file system (the non-root user, CA certificates, every library the binary loads), and the
//! binary run from that root file system against the API server, with the image's own libraries.
//! `crane push` takes the tarball.
//!
//! The image is `$FERRO_IPAM_IMAGE_TARBALL` (what `make image` wrote; `make test` sets it), else one that
//! `deploy/image/build.sh` assembles here from the binary under test.

use std::path::{Path, PathBuf};
use std::process::Command;

use ferro_ipam_e2e::Provider;
use ferro_ipam_e2e::objects::Scope;
use ferro_ipam_e2e::plane::repo_root;
use ferro_ipam_e2e::process::free_port;
use serde_json::{Value, json};

use crate::PROMPTLY;

fn run(command: &mut Command) -> String {
    let output = command.output().unwrap_or_else(|e| panic!("{command:?}: {e}"));
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "{command:?}: {text}{}", String::from_utf8_lossy(&output.stderr));
    text
}

/// The image tarball, and the directory that holds it if it was built here.
fn image() -> (PathBuf, Option<tempfile::TempDir>) {
    if let Some(path) = std::env::var_os("FERRO_IPAM_IMAGE_TARBALL") {
        return (path.into(), None);
    }
    let dir = tempfile::tempdir().unwrap();
    let built = run(Command::new("bash")
        .arg(repo_root().join("deploy/image/build.sh"))
        .env("FERRO_IPAM_BIN", ferro_ipam_e2e::provider::binary())
        .env("IMAGE_DIR", dir.path()));
    (built.lines().last().expect("build.sh prints the tarball").into(), Some(dir))
}

fn json_file(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))).unwrap()
}

fn blob(layout: &Path, digest: &str) -> PathBuf {
    layout.join("blobs/sha256").join(digest.strip_prefix("sha256:").expect("a sha256 digest"))
}

#[tokio::test(flavor = "multi_thread")]
async fn the_image_runs_as_non_root_from_its_own_root_file_system() {
    let (tarball, _built) = image();
    let unpacked = tempfile::tempdir().unwrap();
    let layout = unpacked.path().join("layout");
    std::fs::create_dir(&layout).unwrap();
    run(Command::new("tar").arg("-xf").arg(&tarball).arg("-C").arg(&layout));

    // The OCI layout names the image; its configuration says how it runs.
    let version = format!("v{}", env!("CARGO_PKG_VERSION"));
    assert_eq!(json_file(&layout.join("oci-layout"))["imageLayoutVersion"], "1.0.0");
    let index = json_file(&layout.join("index.json"));
    let entry = &index["manifests"][0];
    assert_eq!(entry["annotations"]["org.opencontainers.image.ref.name"], version.as_str());
    let manifest = json_file(&blob(&layout, entry["digest"].as_str().unwrap()));
    let config = json_file(&blob(&layout, manifest["config"]["digest"].as_str().unwrap()));
    assert_eq!(
        (&config["os"], &config["architecture"]),
        (&json!("linux"), &json!(std::env::consts::ARCH.replace("x86_64", "amd64").replace("aarch64", "arm64")))
    );
    let run_config = &config["config"];
    assert_eq!(run_config["User"], "65532:65532");
    assert_eq!(run_config["Entrypoint"], json!(["/usr/local/bin/ferro-ipam"]));
    let labels = &run_config["Labels"];
    assert_eq!(labels["org.opencontainers.image.version"], version.as_str());
    assert_eq!(labels["org.opencontainers.image.title"], "ferro-ipam");
    assert_eq!(labels["org.opencontainers.image.licenses"], "Apache-2.0");
    // The docker-archive manifest beside it points at the same configuration and layers.
    let archive = &json_file(&layout.join("manifest.json"))[0];
    assert_eq!(archive["Config"], format!("blobs/sha256/{}", &manifest["config"]["digest"].as_str().unwrap()[7..]));
    assert_eq!(archive["Layers"].as_array().unwrap().len(), manifest["layers"].as_array().unwrap().len());

    // The root file system: every layer, in order.
    let rootfs = unpacked.path().join("rootfs");
    std::fs::create_dir(&rootfs).unwrap();
    for layer in manifest["layers"].as_array().unwrap() {
        let gzip = layer["mediaType"].as_str().unwrap().ends_with("gzip");
        let path = blob(&layout, layer["digest"].as_str().unwrap());
        run(Command::new("tar").arg(if gzip { "-xzf" } else { "-xf" }).arg(&path).arg("-C").arg(&rootfs));
    }
    let passwd = std::fs::read_to_string(rootfs.join("etc/passwd")).unwrap();
    assert!(passwd.lines().any(|l| l.starts_with("nonroot:x:65532:65532:")), "{passwd}");
    assert!(
        std::fs::read_to_string(rootfs.join("etc/ssl/certs/ca-certificates.crt"))
            .unwrap()
            .contains("BEGIN CERTIFICATE")
    );
    let binary = rootfs.join("usr/local/bin/ferro-ipam");

    // The binary runs with the image's loader and libraries only: the loader resolves each
    // library inside the root file system, never on the host.
    let loader = ["lib64/ld-linux-x86-64.so.2", "lib/ld-linux-aarch64.so.1"]
        .iter()
        .map(|p| rootfs.join(p))
        .find(|p| p.exists())
        .expect("the image holds its dynamic loader");
    let library_path = ["lib", "lib64", "lib/x86_64-linux-gnu", "lib/aarch64-linux-gnu", "usr/lib"]
        .map(|d| rootfs.join(d).to_string_lossy().into_owned())
        .join(":");
    let listed =
        run(Command::new(&loader).args(["--inhibit-cache", "--library-path", &library_path, "--list"]).arg(&binary));
    for line in listed.lines().filter(|l| l.contains("=>")) {
        assert!(line.contains(&*rootfs.to_string_lossy()), "a library comes from the host: {line}\n{listed}");
    }
    let s = Scope::new("image").await;
    let (health, metrics) = (format!("127.0.0.1:{}", free_port()), format!("127.0.0.1:{}", free_port()));
    let mut args: Vec<String> = ["--inhibit-cache", "--library-path", &library_path].map(str::to_owned).into();
    args.push(binary.to_string_lossy().into_owned());
    args.extend(
        ["--namespace", &s.ns, "--health-addr", &health, "--diagnostics-address", &metrics, "--insecure-diagnostics"]
            .map(str::to_owned),
    );
    let provider = Provider::launch_program(s.plane, &loader, &args, health, metrics).unwrap();
    provider.wait_ready(std::time::Duration::from_secs(60)).unwrap();
    s.pool("nodes", json!({"addresses": ["10.95.0.10-10.95.0.12"], "prefix": 24})).await.unwrap();
    s.claim("c", "InClusterIPPool", "nodes").await.unwrap();
    s.wait_allocated("c", PROMPTLY).await.unwrap_or_else(|e| panic!("{e:#}\n{}", provider.log_tail(30)));

    // crane push takes the tarball: pushed to a registry on loopback, the image keeps its
    // configuration (its image ID).
    let crane = run(Command::new("bash").arg(repo_root().join("e2e/tools/go-tool.sh")).arg("crane"));
    let crane = crane.lines().last().unwrap();
    let address = format!("127.0.0.1:{}", free_port());
    let registry = ferro_ipam_e2e::process::Process::start(
        "registry",
        {
            let mut command = Command::new(crane);
            command.args(["registry", "serve", "--address", &address]);
            command
        },
        unpacked.path().join("registry.log"),
    )
    .unwrap();
    let target = format!("{address}/ferro-ipam:{version}");
    let pushed = ferro_ipam_e2e::process::wait_until(std::time::Duration::from_secs(10), || {
        Command::new(crane)
            .args(["push", "--insecure"])
            .arg(&tarball)
            .arg(&target)
            .output()
            .is_ok_and(|o| o.status.success())
    });
    assert!(pushed, "crane push {} {target} failed:\n{}", tarball.display(), registry.tail(20));
    let config_digest = run(Command::new(crane).args(["manifest", "--insecure", &target]));
    let pushed_manifest: Value = serde_json::from_str(&config_digest).unwrap();
    assert_eq!(pushed_manifest["config"]["digest"], manifest["config"]["digest"]);
}
