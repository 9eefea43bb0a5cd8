//! MPI jobs: the launcher (`mpirun`, `mpiexec`) runs once, on the job's first node, and starts one daemon per
//! node through `cosched rsh`, its remote shell; the node's agent starts each daemon inside the job's cgroup, so
//! every rank, a child of its node's daemon, is frozen and thawed with the job.
//!
//! This is the remote-launch hook both families of MPI offer for clusters without a resource manager they know
//! (Open MPI's `plm_rsh_agent`, MPICH Hydra's launcher executable), so programs and MPI libraries stay unchanged.
//! The launcher learns the job's hosts and its remote shell from its environment, set here: Open MPI's
//! `OMPI_MCA_*` and Hydra's `HYDRA_*` side by side, each family reading its own. Hydra takes its launcher as one
//! program path, so it gets the `rsh` word through its documented `HYDRA_LAUNCHER_EXTRA_ARGS` (placed before the
//! host name) rather than through a link to the cosched binary that someone would have to create and keep.

use crate::wire::client::Address;
use std::net::{IpAddr, ToSocketAddrs, UdpSocket};
use std::path::Path;

/// The command `cosched rsh` runs on the remote node: what an `ssh host word...` runs, the words joined by
/// spaces and read by the shell.
pub fn remote_shell_argv(words: &[String]) -> Vec<String> {
    vec!["/bin/sh".into(), "-c".into(), words.join(" ")]
}

/// Variables a launcher sets for its own daemons: they are not the remote command's business, as with ssh.
const LAUNCHER_PREFIXES: [&str; 5] = ["OMPI_", "PMIX_", "HYDRA_", "HYDI_", "MPIR_"];

/// The environment `cosched rsh` hands to the remote command: the caller's, without the launcher's own settings.
pub fn remote_environment(vars: impl Iterator<Item = (String, String)>) -> Vec<(String, String)> {
    let launchers = |name: &str| LAUNCHER_PREFIXES.iter().any(|prefix| name.starts_with(prefix));
    vars.filter(|(name, _)| !launchers(name) && name != RSH_ENDS_LAUNCHER).collect()
}

/// What the launcher's node knows about the job's launcher beyond its hosts.
pub struct LauncherNode<'a> {
    /// The cosched binary: `PROGRAM rsh NODE WORDS...` is the launcher's remote shell.
    pub program: &'a Path,
    /// How `cosched rsh` reaches the controller from this node.
    pub controller: &'a Address,
    /// This host's munged, when it is not at MUNGE's default socket.
    pub munge_socket: Option<&'a Path>,
    /// Where the agent wrote [`hydra_host_file`] for the job, readable by its owner.
    pub hydra_host_file: &'a Path,
    /// The network interface whose address Hydra's daemons are to call back (see [`launcher_interface`]).
    pub interface: Option<&'a str>,
}

/// Set in an MPI launcher's environment: a `cosched rsh` that fails ends its caller (the launcher), which would
/// otherwise wait for ever for daemons that never start (see `cosched rsh`).
pub const RSH_ENDS_LAUNCHER: &str = "COSCHED_RSH_ENDS_LAUNCHER";

/// What an MPI job's launcher finds in its environment: the job's hosts with their slots (one per CPU held),
/// `cosched rsh` as its remote shell, and how `cosched rsh` reaches the controller, for Open MPI and for MPICH.
pub fn launcher_environment(hosts: &[(String, u32)], node: &LauncherNode) -> Vec<(String, String)> {
    let dash_host: Vec<String> = hosts.iter().map(|(node, slots)| format!("{node}:{slots}")).collect();
    let program = node.program.display().to_string();
    let mut env = vec![
        ("OMPI_MCA_plm_rsh_agent".to_string(), format!("{program} rsh")),
        ("OMPI_MCA_orte_default_dash_host".to_string(), dash_host.join(",")),
        // Every daemon from the launcher's node, whose environment knows the controller.
        ("OMPI_MCA_plm_rsh_no_tree_spawn".to_string(), "1".to_string()),
        // Hydra: `rsh` rather than `ssh`, which would put ssh's `-x` before the extra word.
        ("HYDRA_LAUNCHER".to_string(), "rsh".to_string()),
        ("HYDRA_LAUNCHER_EXEC".to_string(), program),
        ("HYDRA_LAUNCHER_EXTRA_ARGS".to_string(), "rsh".to_string()),
        ("HYDRA_HOST_FILE".to_string(), node.hydra_host_file.display().to_string()),
        ("COSCHED_MPI_HOSTS".to_string(), dash_host.join(",")),
        (RSH_ENDS_LAUNCHER.to_string(), "1".to_string()),
    ];
    if let Some(interface) = node.interface {
        env.push(("HYDRA_IFACE".to_string(), interface.to_string()));
    }
    env.push(match node.controller {
        Address::Unix(path) => ("COSCHED_SOCKET".to_string(), path.display().to_string()),
        Address::Tcp(address) => ("COSCHED_CONTROLLER".to_string(), address.clone()),
    });
    if let Some(socket) = node.munge_socket {
        env.push(("COSCHED_MUNGE_SOCKET".to_string(), socket.display().to_string()));
    }
    env
}

/// The job's hosts as Hydra's host file has them: `node:slots`, a line each.
pub fn hydra_host_file(hosts: &[(String, u32)]) -> String {
    hosts.iter().map(|(node, slots)| format!("{node}:{slots}\n")).collect()
}

/// The interface Hydra's daemons are to reach the launcher through (`HYDRA_IFACE`): the one this node reaches
/// the controller through, the cluster's network by construction. Without it Hydra gives its daemons the
/// launcher's host name, which need not resolve to an address other nodes reach (Debian maps a host's own name
/// to 127.0.1.1). `None` when the user chose an interface (their `HYDRA_IFACE` stands), when the controller is
/// a local socket (one machine), or when the interface has no IPv4 address, the only kind Hydra looks up.
pub fn launcher_interface(user_environment: &[(String, String)], controller: &Address) -> Option<String> {
    if user_environment.iter().any(|(name, _)| name == "HYDRA_IFACE") {
        return None;
    }
    match controller {
        Address::Unix(_) => None,
        Address::Tcp(address) => interface_toward(address),
    }
}

/// The name of the interface holding the IPv4 address this host sends from to `address` (`host:port`). A UDP
/// socket's `connect` only picks the route: nothing is sent.
fn interface_toward(address: &str) -> Option<String> {
    let target = address.to_socket_addrs().ok()?.find(|a| a.is_ipv4())?;
    let probe = UdpSocket::bind(("0.0.0.0", 0)).ok()?;
    probe.connect(target).ok()?;
    let IpAddr::V4(local) = probe.local_addr().ok()?.ip() else { return None };
    let holds_local = |interface: &nix::ifaddrs::InterfaceAddress| {
        interface.address.as_ref().and_then(|a| a.as_sockaddr_in()).is_some_and(|a| a.ip() == local)
    };
    nix::ifaddrs::getifaddrs().ok()?.find(holds_local).map(|interface| interface.interface_name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_remote_command_is_the_words_read_by_the_shell_as_ssh_does() {
        let words: Vec<String> = ["PATH=/x:$PATH", ";", "export", "PATH", ";", "orted", "-mca", "a", "\"b c\""]
            .iter()
            .map(|w| w.to_string())
            .collect();
        assert_eq!(remote_shell_argv(&words), ["/bin/sh", "-c", "PATH=/x:$PATH ; export PATH ; orted -mca a \"b c\""]);
    }

    #[test]
    fn the_launchers_own_settings_stay_behind() {
        let vars =
            [("PATH", "/bin"), ("OMPI_MCA_plm_rsh_agent", "x"), ("HYDRA_HOST_FILE", "f"), ("COSCHED_JOB_ID", "3")];
        let kept = remote_environment(vars.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        assert_eq!(kept, [("PATH".to_string(), "/bin".to_string()), ("COSCHED_JOB_ID".into(), "3".into())]);
    }

    #[test]
    fn the_launcher_gets_its_hosts_its_remote_shell_and_the_controller() {
        let hosts = [("n0".to_string(), 2), ("n1".to_string(), 1)];
        let controller = Address::Tcp("ctl:780".into());
        let node = LauncherNode {
            program: Path::new("/usr/bin/cosched"),
            controller: &controller,
            munge_socket: Some(Path::new("/m/s")),
            hydra_host_file: Path::new("/log/job-4.hosts"),
            interface: Some("eth1"),
        };
        let env = launcher_environment(&hosts, &node);
        let get = |name: &str| env.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
        assert_eq!(get("OMPI_MCA_plm_rsh_agent"), Some("/usr/bin/cosched rsh"));
        assert_eq!(get("OMPI_MCA_orte_default_dash_host"), Some("n0:2,n1:1"));
        // Hydra runs `/usr/bin/cosched rsh n1 WORDS...`, with the hosts of its host file.
        assert_eq!(get("HYDRA_LAUNCHER"), Some("rsh"));
        assert_eq!(get("HYDRA_LAUNCHER_EXEC"), Some("/usr/bin/cosched"));
        assert_eq!(get("HYDRA_LAUNCHER_EXTRA_ARGS"), Some("rsh"));
        assert_eq!(get("HYDRA_HOST_FILE"), Some("/log/job-4.hosts"));
        assert_eq!(get("HYDRA_IFACE"), Some("eth1"));
        assert_eq!(get("COSCHED_CONTROLLER"), Some("ctl:780"));
        assert_eq!(get("COSCHED_SOCKET"), None);
        assert_eq!(get("COSCHED_MUNGE_SOCKET"), Some("/m/s"));
        assert_eq!(hydra_host_file(&hosts), "n0:2\nn1:1\n");
    }

    #[test]
    fn hydras_daemons_call_back_through_the_interface_toward_the_controller_unless_the_user_chose_one() {
        let loopback = Address::Tcp("127.0.0.1:780".into());
        let lo = launcher_interface(&[], &loopback).expect("loopback has an interface");
        let holds_loopback = nix::ifaddrs::getifaddrs().unwrap().any(|i| {
            i.interface_name == lo
                && i.address.and_then(|a| a.as_sockaddr_in().map(|a| a.ip())) == Some([127, 0, 0, 1].into())
        });
        assert!(holds_loopback, "{lo} does not hold 127.0.0.1");
        let chosen = [("HYDRA_IFACE".to_string(), "ib0".to_string())];
        assert_eq!(launcher_interface(&chosen, &loopback), None);
        assert_eq!(launcher_interface(&[], &Address::Unix("/run/cosched.sock".into())), None);
    }
}
