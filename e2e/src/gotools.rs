//! The Go-built tools the tests drive as users do: helm, clusterctl and crane, each built once
//! per version from the Go module proxy by `e2e/tools/go-tool.sh` into the shared cache.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use anyhow::{Context as _, Result, bail};
use serde_json::json;

use crate::plane::repo_root;

/// The path of `name` (crane, helm or clusterctl), built on the first call if the cache lacks it.
pub fn go_tool(name: &str) -> Result<PathBuf> {
    static BUILT: Mutex<BTreeMap<String, PathBuf>> = Mutex::new(BTreeMap::new());
    let mut built = BUILT.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(path) = built.get(name) {
        return Ok(path.clone());
    }
    let output = Command::new("bash").arg(repo_root().join("e2e/tools/go-tool.sh")).arg(name).output()?;
    if !output.status.success() {
        bail!("building {name}: {}", String::from_utf8_lossy(&output.stderr));
    }
    let path: PathBuf =
        String::from_utf8_lossy(&output.stdout).lines().last().context("go-tool.sh prints the path last")?.into();
    built.insert(name.to_owned(), path.clone());
    Ok(path)
}

/// Runs `program` with `args`; its stdout, or an error with everything it printed.
pub fn run_ok(program: &Path, args: &[&str], env: &[(&str, &Path)]) -> Result<String> {
    let output = Command::new(program).args(args).envs(env.iter().copied()).output()?;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    if !output.status.success() {
        bail!("{} {}: {stdout}{}", program.display(), args.join(" "), String::from_utf8_lossy(&output.stderr));
    }
    Ok(stdout)
}

/// The release's version, as its tags and clusterctl name it.
pub const VERSION: &str = concat!("v", env!("CARGO_PKG_VERSION"));

/// clusterctl with a home of its own, whose configuration's `ferro-ipam` entry (docs/clusterctl.yaml's)
/// points at a local provider repository holding this checkout's release files.
pub struct Clusterctl {
    home: tempfile::TempDir,
    binary: PathBuf,
}

impl Clusterctl {
    /// A local repository of this checkout's files: `deploy/clusterctl/ipam-components.yaml` and
    /// `metadata.yaml`.
    pub fn with_local_repository() -> Result<Clusterctl> {
        let root = repo_root();
        Clusterctl::with_repository_of(
            &root.join("deploy/clusterctl/ipam-components.yaml"),
            &root.join("metadata.yaml"),
        )
    }

    /// A local repository holding these release files (a `dist/`'s, say), laid out as
    /// docs/install-from-release.md tells users: `<base>/ipam-ferro-ipam/<version>/`.
    pub fn with_repository_of(components: &Path, metadata: &Path) -> Result<Clusterctl> {
        let home = tempfile::tempdir()?;
        let version_dir = home.path().join("repository/ipam-ferro-ipam").join(VERSION);
        std::fs::create_dir_all(&version_dir)?;
        for (from, to) in [(components, "ipam-components.yaml"), (metadata, "metadata.yaml")] {
            std::fs::copy(from, version_dir.join(to))
                .with_context(|| format!("copying {} into the clusterctl repository", from.display()))?;
        }
        let documented: serde_json::Value =
            serde_saphyr::from_str(&std::fs::read_to_string(repo_root().join("docs/clusterctl.yaml"))?)?;
        let mut entry = documented["providers"][0].clone();
        entry["url"] = json!(format!("file://{}", version_dir.join("ipam-components.yaml").display()));
        std::fs::write(home.path().join("clusterctl.yaml"), json!({"providers": [entry]}).to_string())?;
        Ok(Clusterctl { home, binary: go_tool("clusterctl")? })
    }

    pub fn home(&self) -> &Path {
        self.home.path()
    }

    /// Runs clusterctl with this home's configuration, without its version check.
    pub fn run(&self, args: &[&str]) -> Result<String> {
        let config = self.home.path().join("clusterctl.yaml");
        let mut all = args.to_vec();
        all.extend(["--config", config.to_str().context("a UTF-8 temporary path")?]);
        let output = Command::new(&self.binary)
            .args(&all)
            .env("XDG_CONFIG_HOME", self.home.path())
            .env("CLUSTERCTL_DISABLE_VERSIONCHECK", "true")
            .output()?;
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        if !output.status.success() {
            bail!("clusterctl {}: {stdout}{}", args.join(" "), String::from_utf8_lossy(&output.stderr));
        }
        Ok(stdout)
    }

    /// `clusterctl generate provider --ipam ferro-ipam:<version>`: the components as a user gets them.
    pub fn generate_provider(&self) -> Result<String> {
        self.run(&["generate", "provider", "--ipam", &format!("ferro-ipam:{VERSION}")])
    }
}
