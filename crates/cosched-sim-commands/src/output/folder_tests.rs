//! The output folder against someone who may rename and link names in the destination's folder between the
//! check and the commit (the tests play them).

use super::*;
use std::os::unix::fs::{symlink, PermissionsExt};

/// Said straight to stderr: the harness hides `eprintln!` of a passing test, and a skip must be seen.
fn say_skipped(test: &str, why: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "SKIPPED: {test}: {why}");
}

fn skipped_unless_root(test: &str, why: &str) -> bool {
    let skip = !rustix::process::geteuid().is_root();
    if skip {
        say_skipped(test, why);
    }
    skip
}

fn begin(path: &Path) -> OutputDir {
    OutputDir::begin(&OutputDir::check(path).unwrap()).unwrap()
}

fn names_in(folder: &Path) -> Vec<String> {
    let mut names: Vec<String> =
        fs::read_dir(folder).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    names
}

fn scratch_path(folder: &Path) -> PathBuf {
    let name = names_in(folder).into_iter().find(|n| n.contains(".partial-")).expect("a scratch folder");
    folder.join(name)
}

fn victim(folder: &Path) -> PathBuf {
    let victim = folder.join("victim");
    fs::create_dir(&victim).unwrap();
    fs::write(victim.join("precious"), "precious\n").unwrap();
    victim
}

#[test]
fn a_new_folder_gets_the_files_the_marker_and_the_usual_mode_and_nothing_is_left_beside_it() {
    let folder = tempfile::tempdir().unwrap();
    let out = folder.path().join("out");
    let dir = begin(&out);
    let scratch = scratch_path(folder.path());
    assert_eq!(fs::metadata(&scratch).unwrap().permissions().mode() & 0o777, 0o700, "scratch not private");
    dir.write("a.csv", "x\n").unwrap();
    dir.write("batsim/jobs.csv", "y\n").unwrap();
    dir.commit().unwrap();
    assert_eq!(fs::read_to_string(out.join("a.csv")).unwrap(), "x\n");
    assert_eq!(fs::read_to_string(out.join("batsim/jobs.csv")).unwrap(), "y\n");
    assert!(out.join(MARKER).is_file());
    let mode = fs::metadata(&out).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, FOLDER_MODE & !process_umask(), "folder mode {mode:o}");
    assert_eq!(names_in(folder.path()), ["out"]);
}

#[test]
fn an_old_output_is_replaced_whole_and_nothing_is_left_beside_it() {
    let folder = tempfile::tempdir().unwrap();
    let out = folder.path().join("out");
    let first = begin(&out);
    first.write("old.csv", "old\n").unwrap();
    first.write("sub/old.csv", "old\n").unwrap();
    first.commit().unwrap();
    let second = begin(&out);
    second.write("new.csv", "new\n").unwrap();
    second.commit().unwrap();
    assert_eq!(names_in(&out), [MARKER, "new.csv"]);
    assert_eq!(names_in(folder.path()), ["out"]);
}

#[test]
fn an_unfinished_run_leaves_nothing() {
    let folder = tempfile::tempdir().unwrap();
    let dir = begin(&folder.path().join("out"));
    dir.write("a.csv", "x\n").unwrap();
    drop(dir);
    assert!(names_in(folder.path()).is_empty());
}

#[test]
fn check_refuses_links_files_foreign_folders_and_names_that_are_not_a_folder() {
    let folder = tempfile::tempdir().unwrap();
    let empty = folder.path().join("empty");
    fs::create_dir(&empty).unwrap();
    let link = folder.path().join("link");
    symlink(&empty, &link).unwrap();
    let file = folder.path().join("file");
    fs::write(&file, "").unwrap();
    let foreign = victim(folder.path());
    let linked_marker = folder.path().join("linked-marker");
    fs::create_dir(&linked_marker).unwrap();
    symlink(foreign.join("precious"), linked_marker.join(MARKER)).unwrap();
    for (path, why) in [
        (link.join(""), "symbolic link"),
        (link, "symbolic link"),
        (file, "not a folder"),
        (foreign, "did not write"),
        (linked_marker, "did not write"),
        (PathBuf::from("."), "name a folder"),
        (PathBuf::from(".."), "name a folder"),
        (folder.path().join(".."), "name a folder"),
        (PathBuf::from("/"), "name a folder"),
    ] {
        let err = OutputDir::check(&path).expect_err(&path.display().to_string());
        assert!(err.contains(why), "{}: {err}", path.display());
    }
    assert!(OutputDir::check(&empty).is_ok());
    assert_eq!(names_in(folder.path()), ["empty", "file", "link", "linked-marker", "victim"], "begin made something");
}

#[test]
fn names_inside_the_output_cannot_leave_it() {
    let folder = tempfile::tempdir().unwrap();
    let dir = begin(&folder.path().join("out"));
    for name in ["../escaped", "/tmp/escaped", "a/../../escaped", "", "."] {
        assert!(dir.write(name, "x").is_err(), "{name:?} was written");
    }
    assert!(!folder.path().join("escaped").exists());
}

#[test]
fn a_destination_swapped_for_a_link_meanwhile_is_not_replaced_and_the_results_are_kept() {
    let folder = tempfile::tempdir().unwrap();
    let out = folder.path().join("out");
    fs::create_dir(&out).unwrap();
    let victim = victim(folder.path());
    let dir = begin(&out);
    dir.write("a.csv", "x\n").unwrap();
    fs::remove_dir(&out).unwrap();
    symlink(&victim, &out).unwrap();
    let err = dir.commit().expect_err("committed over a link");
    assert!(err.contains("replaced it meanwhile") && err.contains("the results are kept in"), "{err}");
    assert_eq!(fs::read_to_string(victim.join("precious")).unwrap(), "precious\n");
    assert!(fs::symlink_metadata(&out).unwrap().file_type().is_symlink());
    assert_eq!(fs::read_to_string(scratch_path(folder.path()).join("a.csv")).unwrap(), "x\n");
}

#[test]
fn a_foreign_folder_swapped_in_for_the_destination_meanwhile_is_never_removed() {
    let folder = tempfile::tempdir().unwrap();
    let out = folder.path().join("out");
    begin(&out).commit().unwrap();
    let dir = begin(&out);
    fs::remove_dir_all(&out).unwrap();
    fs::rename(victim(folder.path()), &out).unwrap();
    // (Refused by its inode, or, where the file system gave the freed inode to the new folder, by its files.)
    let err = dir.commit().expect_err("replaced a foreign folder");
    assert!(err.contains("the results are kept in"), "{err}");
    assert_eq!(fs::read_to_string(out.join("precious")).unwrap(), "precious\n");
}

#[test]
fn links_inside_an_old_output_are_removed_not_followed() {
    let folder = tempfile::tempdir().unwrap();
    let out = folder.path().join("out");
    begin(&out).commit().unwrap();
    let victim = victim(folder.path());
    symlink(&victim, out.join("to-folder")).unwrap();
    symlink(victim.join("precious"), out.join("to-file")).unwrap();
    begin(&out).commit().unwrap();
    assert_eq!(names_in(&out), [MARKER]);
    assert_eq!(fs::read_to_string(victim.join("precious")).unwrap(), "precious\n");
}

#[test]
fn a_folder_swapped_in_for_the_scratch_of_an_unfinished_run_is_not_removed() {
    let folder = tempfile::tempdir().unwrap();
    let dir = begin(&folder.path().join("out"));
    let scratch = scratch_path(folder.path());
    fs::rename(&scratch, folder.path().join("moved")).unwrap();
    fs::rename(victim(folder.path()), &scratch).unwrap();
    drop(dir);
    assert_eq!(fs::read_to_string(scratch.join("precious")).unwrap(), "precious\n");
}

#[test]
fn files_are_written_into_the_scratch_folder_even_if_its_name_is_taken_meanwhile() {
    let folder = tempfile::tempdir().unwrap();
    let dir = begin(&folder.path().join("out"));
    let scratch = scratch_path(folder.path());
    let moved = folder.path().join("moved");
    fs::rename(&scratch, &moved).unwrap();
    let victim = victim(folder.path());
    symlink(&victim, &scratch).unwrap();
    dir.write("precious", "overwritten\n").unwrap();
    assert_eq!(fs::read_to_string(victim.join("precious")).unwrap(), "precious\n");
    assert_eq!(fs::read_to_string(moved.join("precious")).unwrap(), "overwritten\n");
    let err = dir.commit().expect_err("renamed a link into place");
    assert!(err.contains("renamed the scratch folder"), "{err}");
    assert!(!folder.path().join("out").exists());
}

/// The path for file systems without rename flags (NFS): the old output moved aside, then removed.
#[test]
fn without_rename_flags_an_old_output_is_moved_aside_then_removed() {
    let folder = tempfile::tempdir().unwrap();
    let out = folder.path().join("out");
    for round in ["first", "second"] {
        let mut dir = begin(&out);
        dir.write("round", round).unwrap();
        match &dir.found {
            None => dir.rename_onto_absent().unwrap(),
            Some(found) => {
                dir.check_destination_again().unwrap();
                let name = dir.move_aside_then_rename().unwrap();
                assert!(name.to_string_lossy().contains(".replaced-"));
                remove_checked(dir.parent.as_fd(), &name, found.identity).unwrap();
            }
        }
        dir.committed = true;
        assert_eq!(fs::read_to_string(out.join("round")).unwrap(), round);
        assert_eq!(names_in(folder.path()), ["out"]);
    }
}

#[test]
fn a_mount_point_is_refused() {
    if skipped_unless_root("a_mount_point_is_refused", "mounting needs root") {
        return;
    }
    let folder = tempfile::tempdir().unwrap();
    let mount = folder.path().join("mounted");
    fs::create_dir(&mount).unwrap();
    let status =
        std::process::Command::new("mount").args(["-t", "tmpfs", "cosched-test", mount.to_str().unwrap()]).status();
    if !status.is_ok_and(|s| s.success()) {
        panic!("cannot mount a tmpfs as root: the check of mount points is untested");
    }
    let checked = OutputDir::check(&mount);
    let _ = std::process::Command::new("umount").arg(&mount).status();
    assert!(checked.expect_err("a mount point was taken").contains("mount point"));
}

#[test]
fn a_destination_made_meanwhile_is_not_replaced_even_if_it_looks_like_cosched_output() {
    let folder = tempfile::tempdir().unwrap();
    let out = folder.path().join("out");
    let dir = begin(&out);
    dir.write("new", "new\n").unwrap();
    let other = begin(&folder.path().join("elsewhere"));
    other.write("precious", "precious\n").unwrap();
    other.commit().unwrap();
    fs::rename(folder.path().join("elsewhere"), &out).unwrap();
    let err = dir.commit().expect_err("replaced a folder made meanwhile");
    assert!(err.contains("someone made it meanwhile"), "{err}");
    assert_eq!(fs::read_to_string(out.join("precious")).unwrap(), "precious\n");
}

/// The other user renames one of the victim's earlier outputs onto the destination's name: replaced, its
/// files would go, though the other user could not remove them.
#[test]
fn another_output_renamed_onto_the_destination_meanwhile_is_not_removed() {
    let folder = tempfile::tempdir().unwrap();
    let (run1, run2) = (folder.path().join("run1"), folder.path().join("run2"));
    let first = begin(&run1);
    first.write("precious", "precious\n").unwrap();
    first.commit().unwrap();
    begin(&run2).commit().unwrap();
    let dir = begin(&run2);
    fs::remove_dir_all(&run2).unwrap();
    fs::rename(&run1, &run2).unwrap();
    assert!(dir.commit().is_err());
    assert_eq!(fs::read_to_string(run2.join("precious")).unwrap(), "precious\n");
}

#[test]
fn begin_takes_a_destination_changed_since_the_check_and_the_commit_keeps_the_results() {
    let folder = tempfile::tempdir().unwrap();
    let out = folder.path().join("out");
    let checked = OutputDir::check(&out).unwrap();
    fs::create_dir(&out).unwrap();
    fs::write(out.join("theirs"), "").unwrap();
    let dir = OutputDir::begin(&checked).expect("begin refused after a long run");
    dir.write("a.csv", "x\n").unwrap();
    let err = dir.commit().expect_err("replaced a folder made meanwhile");
    let kept = scratch_path(folder.path());
    assert!(err.contains(&kept.display().to_string()), "{err}");
    assert_eq!(fs::read_to_string(kept.join("a.csv")).unwrap(), "x\n");
}

#[test]
fn a_linked_folder_on_the_way_is_followed() {
    let folder = tempfile::tempdir().unwrap();
    fs::create_dir(folder.path().join("real")).unwrap();
    symlink(folder.path().join("real"), folder.path().join("link")).unwrap();
    let dir = begin(&folder.path().join("link/out"));
    dir.write("a.csv", "x\n").unwrap();
    dir.commit().unwrap();
    assert!(folder.path().join("real/out/a.csv").is_file());
}

#[test]
fn the_folders_setgid_bit_is_kept() {
    let folder = tempfile::tempdir().unwrap();
    let shared = folder.path().join("shared");
    fs::create_dir(&shared).unwrap();
    fs::set_permissions(&shared, fs::Permissions::from_mode(0o2775)).unwrap();
    if fs::metadata(&shared).unwrap().permissions().mode() & 0o2000 == 0 {
        say_skipped("the_folders_setgid_bit_is_kept", "this file system drops the setgid bit");
        return;
    }
    begin(&shared.join("out")).commit().unwrap();
    assert_ne!(fs::metadata(shared.join("out")).unwrap().permissions().mode() & 0o2000, 0);
}

/// Another user moves a folder of theirs into the victim's old output: replacing the output must not remove
/// it (the victim's removal would reach what its owner's rules protect).
#[test]
fn another_users_entries_in_an_old_output_are_left() {
    if skipped_unless_root("another_users_entries_in_an_old_output_are_left", "giving a file away needs root") {
        return;
    }
    let folder = tempfile::tempdir().unwrap();
    let out = folder.path().join("out");
    begin(&out).commit().unwrap();
    fs::create_dir(out.join("theirs")).unwrap();
    fs::write(out.join("theirs/precious"), "precious\n").unwrap();
    let nobody = Some(rustix::process::Uid::from_raw(65534));
    for path in [out.join("theirs"), out.join("theirs/precious")] {
        rustix::fs::chown(&path, nobody, None).unwrap();
    }
    let dir = begin(&out);
    dir.write("new", "").unwrap();
    dir.commit().unwrap();
    assert_eq!(names_in(&out), [MARKER, "new"]);
    let aside = scratch_path(folder.path());
    assert_eq!(fs::read_to_string(aside.join("theirs/precious")).unwrap(), "precious\n");
}

/// Results kept after a refused swap stay private.
#[test]
fn results_kept_after_a_refused_swap_stay_private() {
    let folder = tempfile::tempdir().unwrap();
    let out = folder.path().join("out");
    let dir = begin(&out);
    fs::create_dir(&out).unwrap();
    assert!(dir.commit().is_err());
    let kept = scratch_path(folder.path());
    assert_eq!(fs::metadata(&kept).unwrap().permissions().mode() & 0o777, 0o700);
}

#[test]
fn the_check_makes_a_missing_folder_on_the_way() {
    let folder = tempfile::tempdir().unwrap();
    let checked = OutputDir::check(&folder.path().join("a/b/out")).unwrap();
    assert!(folder.path().join("a/b").is_dir() && !folder.path().join("a/b/out").exists());
    OutputDir::begin(&checked).unwrap().commit().unwrap();
    assert!(folder.path().join("a/b/out").join(MARKER).is_file());
}

/// Only what nobody else could have put there goes with an old output: a folder others may write (an older
/// output made with umask 002, a subfolder opened to all) is left with what it holds.
#[test]
fn an_old_output_others_could_write_is_left_with_what_it_holds() {
    let folder = tempfile::tempdir().unwrap();
    let out = folder.path().join("out");
    let first = begin(&out);
    first.write("open/precious", "precious\n").unwrap();
    first.commit().unwrap();
    fs::set_permissions(out.join("open"), fs::Permissions::from_mode(0o777)).unwrap();
    begin(&out).commit().unwrap();
    let aside = scratch_path(folder.path());
    assert_eq!(fs::read_to_string(aside.join("open/precious")).unwrap(), "precious\n");
    fs::set_permissions(&out, fs::Permissions::from_mode(0o775)).unwrap();
    fs::write(out.join("mine"), "").unwrap();
    begin(&out).commit().unwrap();
    assert_eq!(names_in(folder.path()).len(), 3, "the group-writable output was removed");
}

#[test]
fn an_outputs_folders_and_files_are_never_writable_by_group_or_others() {
    let folder = tempfile::tempdir().unwrap();
    let out = folder.path().join("out");
    let dir = begin(&out);
    dir.write("batsim/jobs.csv", "x\n").unwrap();
    dir.commit().unwrap();
    for path in [out.clone(), out.join("batsim"), out.join("batsim/jobs.csv"), out.join(MARKER)] {
        let mode = fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o022, 0, "{} is {mode:o}", path.display());
    }
}

/// A default ACL on the destination's folder (perhaps another user's) would open the output to others.
#[test]
fn a_default_acl_of_the_folder_does_not_reach_the_output() {
    let folder = tempfile::tempdir().unwrap();
    let acl = std::process::Command::new("setfacl").args(["-d", "-m", "u:65534:rwx"]).arg(folder.path()).status();
    if !acl.is_ok_and(|s| s.success()) {
        say_skipped("a_default_acl_of_the_folder_does_not_reach_the_output", "setfacl is missing or refused");
        return;
    }
    let out = folder.path().join("out");
    let dir = begin(&out);
    dir.write("batsim/jobs.csv", "x\n").unwrap();
    dir.commit().unwrap();
    for path in [out.clone(), out.join("batsim"), out.join("batsim/jobs.csv")] {
        let listed = std::process::Command::new("getfacl").args(["-cp"]).arg(&path).output().unwrap();
        let text = String::from_utf8_lossy(&listed.stdout);
        assert!(!text.contains("user:65534") && !text.contains("user:nobody"), "{}: {text}", path.display());
    }
}

/// A marker another user planted does not make a folder cosched's.
#[test]
fn a_marker_of_another_users_is_not_cosched_output() {
    if skipped_unless_root("a_marker_of_another_users_is_not_cosched_output", "giving a file away needs root") {
        return;
    }
    let folder = tempfile::tempdir().unwrap();
    let out = folder.path().join("out");
    fs::create_dir(&out).unwrap();
    fs::write(out.join(MARKER), "").unwrap();
    fs::write(out.join("precious"), "").unwrap();
    rustix::fs::chown(out.join(MARKER), Some(rustix::process::Uid::from_raw(65534)), None).unwrap();
    let err = OutputDir::check(&out).expect_err("a planted marker was taken");
    assert!(err.contains("did not write"), "{err}");
}
