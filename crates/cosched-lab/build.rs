//! The commit this build was made from, as `COSCHED_BUILD_COMMIT` ("unknown" outside a git checkout): a study's
//! journal and shards name it, so that runs kept by one build are not finished or merged by another.
//! A build from a tree with uncommitted changes carries the commit it started from.

use std::path::Path;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let output = Command::new("git").args(args).output().ok()?;
    output.status.success().then(|| String::from_utf8_lossy(&output.stdout).trim().to_string())
}

fn main() {
    let commit = git(&["rev-parse", "HEAD"]).unwrap_or_else(|| "unknown".into());
    if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        // A new commit moves HEAD's branch; a checkout moves HEAD.
        let mut watched = vec![format!("{dir}/HEAD"), format!("{dir}/packed-refs")];
        watched.extend(git(&["symbolic-ref", "-q", "HEAD"]).map(|branch| format!("{dir}/{branch}")));
        for path in watched.iter().filter(|p| Path::new(p).exists()) {
            println!("cargo:rerun-if-changed={path}");
        }
    }
    println!("cargo:rustc-env=COSCHED_BUILD_COMMIT={commit}");
}
