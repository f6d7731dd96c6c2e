//! Removing a node completely, whether its run ended well, failed, or was killed and left
//! everything behind: the pods' processes, containerd's shims, the mounts, the cgroups, the
//! network namespace and the node's directory. Every step is idempotent.

use std::path::Path;
use std::time::Duration;

use super::config::CGROUP_ROOT;
use super::network;

/// Everything the node left on this machine, gone. `root` is the node's directory.
pub fn remove_node(root: &Path) {
    for _ in 0..20 {
        let killed = kill_node_processes(root);
        if killed == 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    unmount_under(root);
    network::delete();
    remove_cgroups();
    let _ = std::fs::remove_dir_all(root);
}

/// SIGKILLs every process of the node: those in its network namespace (kubelet, containerd,
/// its shims, kube-proxy), those in its pods' cgroups, and any other that names its directory.
/// Returns how many were found.
fn kill_node_processes(root: &Path) -> usize {
    let root = root.to_string_lossy().into_owned();
    let node_net = std::fs::metadata(format!("/run/netns/{}", network::NAMESPACE)).ok().map(|m| inode(&m));
    let mut found = 0;
    for pid in pids() {
        if pid == std::process::id() as i32 {
            continue;
        }
        let proc = Path::new("/proc").join(pid.to_string());
        let in_pod = std::fs::read_to_string(proc.join("cgroup")).is_ok_and(|c| c.contains(CGROUP_ROOT));
        let in_node_net =
            node_net.is_some() && std::fs::metadata(proc.join("ns/net")).is_ok_and(|m| Some(inode(&m)) == node_net);
        let names_root =
            std::fs::read(proc.join("cmdline")).is_ok_and(|c| String::from_utf8_lossy(&c).contains(root.as_str()));
        if in_pod || in_node_net || names_root {
            // SAFETY: a plain kill(2) of a process of this machine's node.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
            found += 1;
        }
    }
    found
}

fn inode(metadata: &std::fs::Metadata) -> u64 {
    std::os::unix::fs::MetadataExt::ino(metadata)
}

fn pids() -> Vec<i32> {
    std::fs::read_dir("/proc")
        .map(|dir| dir.flatten().filter_map(|e| e.file_name().to_str()?.parse().ok()).collect())
        .unwrap_or_default()
}

/// Detaches every mount at or under `root`, deepest first: kubelet's volume mounts,
/// containerd's overlays and its pods' network namespaces.
fn unmount_under(root: &Path) {
    let root = root.to_string_lossy().into_owned();
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut points: Vec<String> = mountinfo
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(|point| point.replace("\\040", " "))
        .filter(|point| point.starts_with(root.as_str()))
        .collect();
    points.sort_by_key(|point| std::cmp::Reverse(point.len()));
    for point in points {
        let Ok(path) = std::ffi::CString::new(point) else { continue };
        // SAFETY: umount2 with a valid C string; failure (already gone) is fine.
        unsafe {
            libc::umount2(path.as_ptr(), libc::MNT_DETACH);
        }
    }
}

/// Removes kubelet's cgroup tree under every cgroup v1 hierarchy, leaves first.
fn remove_cgroups() {
    let Ok(hierarchies) = std::fs::read_dir("/sys/fs/cgroup") else { return };
    for hierarchy in hierarchies.flatten() {
        remove_tree(&hierarchy.path().join(CGROUP_ROOT.trim_start_matches('/')));
    }
}

fn remove_tree(dir: &Path) {
    if let Ok(children) = std::fs::read_dir(dir) {
        for child in children.flatten() {
            if child.file_type().is_ok_and(|t| t.is_dir()) {
                remove_tree(&child.path());
            }
        }
    }
    let _ = std::fs::remove_dir(dir);
}
