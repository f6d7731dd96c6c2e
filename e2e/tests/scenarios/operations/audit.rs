//! What the RBAC tests share: the requests an identity made, read from the audited API server's
//! log; the verbs RBAC rules grant; kubeconfigs of the identities the provider runs as.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use ferro_ipam_e2e::ControlPlane;
use serde_json::Value;

/// An audit policy that logs the requests of `users` (metadata only) and nothing else.
pub fn policy_for(users: &[&str]) -> String {
    let users: Vec<String> = users.iter().map(|u| format!("\"{u}\"")).collect();
    format!(
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n\
         - level: Metadata\n  users: [{}]\n- level: None\n",
        users.join(", ")
    )
}

/// A kubeconfig for this plane with `user` (the YAML of a kubeconfig `user:` entry).
pub fn kubeconfig(plane: &ControlPlane, name: &str, user: &str) -> PathBuf {
    let path = plane.dir.join(format!("{name}.kubeconfig"));
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: e2e\n  cluster:\n    server: {}\n    certificate-authority: {}\n\
             users:\n- name: {name}\n  user:\n{user}\ncontexts:\n- name: e2e\n  context:\n    cluster: e2e\n    user: {name}\n\
             current-context: e2e\n",
            plane.server,
            plane.credentials.ca_cert.display()
        ),
    )
    .unwrap();
    path
}

/// A kubeconfig for this plane with a fresh token of the ServiceAccount `ns`/`name`.
pub fn service_account_kubeconfig(plane: &ControlPlane, ns: &str, name: &str) -> PathBuf {
    let token = plane.kubectl_ok(&["create", "token", name, "-n", ns, "--duration", "2h"]).unwrap();
    kubeconfig(plane, name, &format!("    token: {}", token.trim()))
}

/// One request in the audit log.
#[derive(Debug)]
pub struct Request {
    pub user: String,
    /// `group/resource[/subresource]`, or `url:` and the URL of a non-resource request.
    pub resource: String,
    /// The namespace of the object or collection; None for cluster-scoped and cluster-wide ones.
    pub namespace: Option<String>,
    /// The object's name, when the request names one.
    pub name: Option<String>,
    pub verb: String,
    pub allowed: bool,
    pub code: i64,
    pub uri: String,
}

impl Request {
    /// Refused by authorisation, or answered 403.
    pub fn refused(&self) -> bool {
        !self.allowed || self.code == 403
    }
}

pub fn audit_log(path: &Path) -> Vec<Request> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut seen = BTreeSet::new();
    text.lines()
        .map(|line| serde_json::from_str::<Value>(line).expect("audit events are JSON lines"))
        .filter(|e| e["stage"] == "ResponseComplete" || e["stage"] == "ResponseStarted")
        .filter(|e| seen.insert(e["auditID"].as_str().unwrap_or_default().to_owned()))
        .map(|e| {
            let object = &e["objectRef"];
            let resource = if object.is_object() {
                let mut r = format!(
                    "{}/{}",
                    object["apiGroup"].as_str().unwrap_or(""),
                    object["resource"].as_str().unwrap_or("")
                );
                if let Some(sub) = object["subresource"].as_str() {
                    r = format!("{r}/{sub}");
                }
                r
            } else {
                format!("url:{}", e["requestURI"].as_str().unwrap_or_default())
            };
            Request {
                user: e["user"]["username"].as_str().unwrap_or_default().to_owned(),
                resource,
                namespace: object["namespace"].as_str().map(str::to_owned),
                name: object["name"].as_str().map(str::to_owned),
                verb: e["verb"].as_str().unwrap_or_default().to_owned(),
                allowed: e["annotations"]["authorization.k8s.io/decision"] == "allow",
                code: e["responseStatus"]["code"].as_i64().unwrap_or(0),
                uri: e["requestURI"].as_str().unwrap_or_default().to_owned(),
            }
        })
        .collect()
}

/// `group/resource[/subresource]` -> verbs, as RBAC rules grant them.
pub fn granted(rules: &Value) -> BTreeMap<String, BTreeSet<String>> {
    let mut grants: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for rule in rules.as_array().unwrap() {
        for group in rule["apiGroups"].as_array().unwrap() {
            for resource in rule["resources"].as_array().unwrap() {
                let key = format!("{}/{}", group.as_str().unwrap(), resource.as_str().unwrap());
                grants
                    .entry(key)
                    .or_default()
                    .extend(rule["verbs"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_owned()));
            }
        }
    }
    grants
}

/// The requests of `user` in the audit log.
pub fn requests_of(path: &Path, user: &str) -> Vec<Request> {
    audit_log(path).into_iter().filter(|r| r.user == user).collect()
}

/// Why a granted verb may go unused in the scenario, or None when it must be used.
fn unused_is_expected(resource: &str, verb: &str, grants: &BTreeMap<String, BTreeSet<String>>) -> Option<&'static str> {
    if verb == "get" && grants.get(resource).is_some_and(|v| v.contains("list")) {
        return Some("get reveals nothing that list does not");
    }
    if verb == "update" && resource.ends_with("/finalizers") {
        return Some("checked by admission for blockOwnerDeletion, proven by the run without it");
    }
    if resource == "events.k8s.io/events" && verb == "patch" {
        return Some("kube-runtime's Recorder patches an Event that repeats for an unchanged object");
    }
    None
}

/// The granted verbs that no request used (`verb group/resource`), but those
/// [`unused_is_expected`] explains.
pub fn unneeded(grants: &BTreeMap<String, BTreeSet<String>>, requests: &[Request]) -> Vec<String> {
    let used: BTreeSet<(&str, &str)> = requests.iter().map(|r| (r.resource.as_str(), r.verb.as_str())).collect();
    let mut extra = Vec::new();
    for (resource, verbs) in grants {
        for verb in verbs {
            if !used.contains(&(resource.as_str(), verb.as_str()))
                && unused_is_expected(resource, verb, grants).is_none()
            {
                extra.push(format!("{verb} {resource}"));
            }
        }
    }
    extra
}
