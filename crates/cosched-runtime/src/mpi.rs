//! MPI jobs: the launcher (`mpirun`, `mpiexec`) runs once, on the job's first node, and starts one daemon per
//! node through `cosched rsh`, its remote shell; the node's agent starts each daemon inside the job's cgroup, so
//! every rank, a child of its node's daemon, is frozen and thawed with the job.
//!
//! This is the remote-launch hook both families of MPI offer for clusters without a resource manager they know
//! (Open MPI's `plm_rsh_agent`, MPICH Hydra's launcher executable), so programs and MPI libraries stay unchanged.
//! The launcher learns the job's hosts and its remote shell from its environment, set here.

use crate::client::Address;
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
    vars.filter(|(name, _)| !LAUNCHER_PREFIXES.iter().any(|prefix| name.starts_with(prefix))).collect()
}

/// What an MPI job's launcher finds in its environment: the job's hosts with their slots (one per CPU held),
/// `cosched rsh` as its remote shell, and how `cosched rsh` reaches the controller from this node (and this
/// host's munged, when it is not at MUNGE's default socket).
pub fn launcher_environment(
    hosts: &[(String, u32)],
    program: &Path,
    controller: &Address,
    munge_socket: Option<&Path>,
) -> Vec<(String, String)> {
    let dash_host: Vec<String> = hosts.iter().map(|(node, slots)| format!("{node}:{slots}")).collect();
    let mut env = vec![
        ("OMPI_MCA_plm_rsh_agent".to_string(), format!("{} rsh", program.display())),
        ("OMPI_MCA_orte_default_dash_host".to_string(), dash_host.join(",")),
        // Every daemon from the launcher's node, whose environment knows the controller.
        ("OMPI_MCA_plm_rsh_no_tree_spawn".to_string(), "1".to_string()),
        ("COSCHED_MPI_HOSTS".to_string(), dash_host.join(",")),
    ];
    env.push(match controller {
        Address::Unix(path) => ("COSCHED_SOCKET".to_string(), path.display().to_string()),
        Address::Tcp(address) => ("COSCHED_CONTROLLER".to_string(), address.clone()),
    });
    if let Some(socket) = munge_socket {
        env.push(("COSCHED_MUNGE_SOCKET".to_string(), socket.display().to_string()));
    }
    env
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
        let env = launcher_environment(&hosts, Path::new("/usr/bin/cosched"), &controller, Some(Path::new("/m/s")));
        let get = |name: &str| env.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
        assert_eq!(get("OMPI_MCA_plm_rsh_agent"), Some("/usr/bin/cosched rsh"));
        assert_eq!(get("OMPI_MCA_orte_default_dash_host"), Some("n0:2,n1:1"));
        assert_eq!(get("COSCHED_CONTROLLER"), Some("ctl:780"));
        assert_eq!(get("COSCHED_SOCKET"), None);
        assert_eq!(get("COSCHED_MUNGE_SOCKET"), Some("/m/s"));
    }
}
