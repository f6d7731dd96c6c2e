//! A real Prometheus (Debian's `prometheus` package) as a process on loopback, with a config and
//! rule file of the test's own, and its HTTP API.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::process::{Process, free_port, http_get, http_status, wait_until};
use anyhow::{Context as _, Result, bail};
use serde_json::{Value, json};

/// `prometheus` and `promtool`: `$FERRO_IPAM_PROMETHEUS_DIR`, else on PATH, else installed with
/// apt-get (as `make tools` does). Without them the metrics test fails, saying what to install:
/// a test that cannot run is not a test that passed.
pub fn binaries() -> (PathBuf, PathBuf) {
    let find = |name: &str| -> Option<PathBuf> {
        if let Some(dir) = std::env::var_os("FERRO_IPAM_PROMETHEUS_DIR") {
            return Some(Path::new(&dir).join(name)).filter(|p| p.exists());
        }
        std::env::split_paths(&std::env::var_os("PATH")?).map(|d| d.join(name)).find(|p| p.exists())
    };
    if let (Some(server), Some(tool)) = (find("prometheus"), find("promtool")) {
        return (server, tool);
    }
    assert!(
        Command::new("apt-get").arg("--version").output().is_ok(),
        "prometheus and promtool are not installed and there is no apt-get to install them: install \
         Prometheus 2.x (or run `make tools`), or point FERRO_IPAM_PROMETHEUS_DIR at them"
    );
    let install = || {
        Command::new("apt-get")
            .args(["install", "-y", "--no-install-recommends", "prometheus"])
            .env("DEBIAN_FRONTEND", "noninteractive")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if !install() {
        let updated = Command::new("apt-get").arg("update").output().is_ok_and(|o| o.status.success());
        assert!(updated && install(), "apt-get could not install prometheus (run `make tools` as root)");
    }
    let installed = |name: &str| find(name).unwrap_or_else(|| panic!("apt-get installed prometheus but not {name}"));
    (installed("prometheus"), installed("promtool"))
}

/// Runs `promtool ARGS` and fails with its output unless it succeeds.
pub fn promtool(tool: &Path, args: &[&str]) -> Result<String> {
    let output = Command::new(tool).args(args).output()?;
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    if !output.status.success() {
        bail!("promtool {}: {text}", args.join(" "));
    }
    Ok(text)
}

/// A running Prometheus.
pub struct Prometheus {
    pub address: String,
    pub config: PathBuf,
    pub rules: PathBuf,
    process: Process,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    /// Starts Prometheus with `scrape` (one scrape config) and `rules` (a rule file), scraping and
    /// evaluating every second.
    pub fn start(server: &Path, scrape: Value, rules: &Value) -> Result<Prometheus> {
        let dir = tempfile::Builder::new().prefix("ferro-ipam-prometheus-").tempdir()?;
        let rules_path = dir.path().join("rules.yaml");
        // JSON is YAML: Prometheus and promtool read it as a rule file.
        std::fs::write(&rules_path, serde_json::to_string_pretty(rules)?)?;
        let config = json!({
            "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
            "rule_files": [rules_path],
            "scrape_configs": [scrape],
        });
        let config_path = dir.path().join("prometheus.yaml");
        std::fs::write(&config_path, serde_json::to_string_pretty(&config)?)?;
        let address = format!("127.0.0.1:{}", free_port());
        let mut command = Command::new(server);
        command.args([
            format!("--config.file={}", config_path.display()),
            format!("--storage.tsdb.path={}", dir.path().join("data").display()),
            format!("--web.listen-address={address}"),
            "--storage.tsdb.retention.time=1h".to_owned(),
        ]);
        let mut process = Process::start("prometheus", command, dir.path().join("prometheus.log"))?;
        if !wait_until(Duration::from_secs(30), || http_status(&address, "/-/ready") == Some(200))
            || !process.is_running()
        {
            bail!("prometheus did not become ready:\n{}", process.tail(30));
        }
        Ok(Prometheus { address, config: config_path, rules: rules_path, process, _dir: dir })
    }

    /// GET an API path; the `data` of a successful answer.
    fn api(&self, path: &str) -> Result<Value> {
        let body = http_get(&self.address, path).with_context(|| format!("GET {path}: no 200 answer"))?;
        let answer: Value = serde_json::from_str(&body)?;
        if answer["status"] != "success" {
            bail!("GET {path}: {answer}");
        }
        Ok(answer["data"].clone())
    }

    /// An instant query: its result vector (empty when nothing matches).
    pub fn query(&self, expr: &str) -> Result<Vec<Value>> {
        let data = self.api(&format!("/api/v1/query?query={}", encode(expr)))?;
        Ok(data["result"].as_array().cloned().unwrap_or_default())
    }

    /// A range query over the last `seconds`, one point a second.
    pub fn query_range(&self, expr: &str, seconds: u64) -> Result<Value> {
        let end = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_secs();
        let path = format!("/api/v1/query_range?query={}&start={}&end={end}&step=1", encode(expr), end - seconds);
        Ok(self.api(&path)?["result"].clone())
    }

    /// The values of a label over the series that `selector` matches.
    pub fn label_values(&self, label: &str, selector: &str) -> Result<Vec<String>> {
        let data = self.api(&format!("/api/v1/label/{label}/values?match[]={}", encode(selector)))?;
        Ok(data.as_array().into_iter().flatten().filter_map(|v| v.as_str().map(str::to_owned)).collect())
    }

    /// The rule groups as Prometheus evaluates them (health, state, last error).
    pub fn rules(&self) -> Result<Vec<Value>> {
        Ok(self.api("/api/v1/rules")?["groups"].as_array().cloned().unwrap_or_default())
    }

    pub fn log_tail(&self, lines: usize) -> String {
        self.process.tail(lines)
    }
}

/// Percent-encodes a query parameter.
fn encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The scrape config a Prometheus operator derives from a ServiceMonitor endpoint, for one target
/// with the labels the operator would give a pod of the metrics Service. `token_file` stands in
/// for the Secret key of the endpoint's `authorization.credentials` (the operator copies it into
/// Prometheus' configuration), and `ca_file` for the Secret key of its `tlsConfig.ca`.
pub fn scrape_config(endpoint: &Value, target: &str, token_file: &Path, ca_file: Option<&Path>) -> Value {
    let relabelings: Vec<Value> = endpoint["metricRelabelings"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            let mut rule = json!({});
            for (from, to) in [
                ("sourceLabels", "source_labels"),
                ("separator", "separator"),
                ("regex", "regex"),
                ("targetLabel", "target_label"),
                ("replacement", "replacement"),
                ("action", "action"),
            ] {
                if !r[from].is_null() {
                    rule[to] = r[from].clone();
                }
            }
            rule
        })
        .collect();
    let mut config = json!({
        "job_name": "ferro-ipam-metrics",
        "honor_labels": endpoint["honorLabels"].as_bool().unwrap_or(false),
        "metrics_path": endpoint["path"].as_str().unwrap_or("/metrics"),
        "static_configs": [{
            "targets": [target],
            "labels": {
                "namespace": "ferro-ipam-system",
                "service": "ferro-ipam-metrics",
                "pod": "ferro-ipam-controller-0",
                "container": "manager",
                "endpoint": endpoint["port"].clone(),
            },
        }],
        "metric_relabel_configs": relabelings,
    });
    if let Some(scheme) = endpoint["scheme"].as_str() {
        config["scheme"] = json!(scheme);
    }
    let tls = &endpoint["tlsConfig"];
    if let Some(skip) = tls["insecureSkipVerify"].as_bool() {
        config["tls_config"] = json!({"insecure_skip_verify": skip});
    }
    if let (Some(ca_file), Some(server_name)) =
        (ca_file.filter(|_| tls["ca"]["secret"].is_object()), tls["serverName"].as_str())
    {
        config["tls_config"] = json!({"ca_file": ca_file, "server_name": server_name});
    }
    if endpoint["authorization"]["credentials"].is_object() {
        let kind = endpoint["authorization"]["type"].as_str().unwrap_or("Bearer");
        config["authorization"] = json!({"type": kind, "credentials_file": token_file});
    }
    config
}

#[test]
fn query_parameters_are_percent_encoded() {
    assert_eq!(encode(r#"a{b="c"} > 0.9"#), "a%7Bb%3D%22c%22%7D%20%3E%200.9");
}
