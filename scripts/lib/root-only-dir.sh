# shellcheck shell=bash
# Directories root writes in, checked so that no other user can have made them or can change them under root's
# feet (docs/security.md, "Scripts and files root touches"). Sourced by scripts/slurm and scripts/check-package;
# the caller defines die MESSAGE.
#
# A directory is root-only when it and every directory above it are root's, none of them a symbolic link, and
# none writable by group or others, but for the sticky bit on a directory above it (as /tmp): there others may
# add names of their own, never rename or remove root's. In a root-only directory nobody else can make a name,
# swap an entry for a link or remove what root made, so root may mkdir, chmod and rm -rf by path inside it.

# The names of absolute path $1 without empty and "." ones, in the array root_only_names; dies on "..".
root_only_split() {
    local name names_given
    root_only_names=()
    [[ $1 == /* ]] || die "$1: give an absolute path"
    IFS=/ read -ra names_given <<<"${1#/}"
    for name in "${names_given[@]}"; do
        [[ -n $name && $name != . ]] || continue
        [[ $name != .. ]] || die "$1: give a path without '..'"
        root_only_names+=("$name")
    done
    ((${#root_only_names[@]})) || die "$1: give a directory below /, not / itself"
}

# Why existing PATH cannot be part of a root-only directory, or nothing. ROLE: "above" for a directory above it
# (the sticky bit lets others add names there), "itself" for the directory root writes in.
root_only_problem() {
    local path=$1 role=$2 uid mode owner
    if [[ -L $path ]]; then
        echo "$path is a symbolic link (to $(readlink -- "$path")); give the directory it stands for"
        return
    fi
    [[ -d $path ]] || { echo "$path is not a directory"; return; }
    read -r uid mode < <(stat -c '%u %a' -- "$path")
    if ((uid != 0)); then
        owner=$(getent passwd "$uid" | cut -d: -f1) || true
        echo "$path belongs to ${owner:-a user without a name} (uid $uid), not root: that user could change" \
            "what root writes there; give a directory only root can write"
        return
    fi
    local writable=$((8#$mode & 8#022)) sticky=$((8#$mode & 8#1000))
    if ((writable)) && { [[ $role == itself ]] || ((!sticky)); }; then
        echo "$path is writable by group or others (mode $mode): they could put links where root writes;" \
            "give a directory only root can write"
    fi
}

# Die unless absolute path DIR is root-only as far as it exists (what does not exist yet is fine).
need_root_only_dir() {
    local dir=$1 part="" i problem role
    root_only_split "$dir"
    problem=$(root_only_problem / above)
    [[ -z $problem ]] || die "$problem"
    for ((i = 0; i < ${#root_only_names[@]}; i++)); do
        part+=/${root_only_names[i]}
        [[ -e $part || -L $part ]] || return 0
        role=above
        ((i < ${#root_only_names[@]} - 1)) || role=itself
        problem=$(root_only_problem "$part" "$role")
        [[ -z $problem ]] || die "$problem"
    done
}

# Make absolute path DIR a root-only directory: check what exists, then make each missing level (mode 0755:
# others may read and pass, never write) and check it, since under a sticky directory someone else may have
# made the name first.
make_root_only_dir() {
    local dir=$1 part="" name names
    need_root_only_dir "$dir"
    names=("${root_only_names[@]}")
    for name in "${names[@]}"; do
        part+=/$name
        [[ -e $part || -L $part ]] && continue
        (umask 022 && mkdir -- "$part") 2>/dev/null || true
        need_root_only_dir "$part"
        [[ -d $part ]] || die "cannot make $part"
    done
}

# Die if root would write to absolute path OUT where another user could change it: OUT must be root-only, unless
# it lies in the checkout REPO whose code root is running anyway (no check then: the checkout is trusted as its
# code is). A path with '..' is refused first, so that "in the checkout" is what the path says, never a way out of
# it. Nothing is checked for other users, who write with their own rights.
need_root_only_output() {
    local repo=$1 out=$2
    [[ $(id -u) == 0 ]] || return 0
    root_only_split "$out"
    [[ $out == "$repo"/* ]] && return 0
    need_root_only_dir "$out"
}

# The same, and make OUT: root-only outside the checkout, each level checked as it is made, so nobody can make it
# between the check and root's first write (call it where the script would mkdir, not long before).
make_root_only_output() {
    local repo=$1 out=$2
    need_root_only_output "$repo" "$out"
    if [[ $(id -u) == 0 && $out != "$repo"/* ]]; then
        make_root_only_dir "$out"
    else
        mkdir -p -- "$out"
    fi
}

# Die when run as root from a checkout another user could change: root would build and run their code (build
# scripts, Makefiles, the programs the scripts start; docs/security.md, "Programs root runs on a user's behalf").
# The checkout (the folder above scripts/) must be root-only all the way up, and nothing in it another user's or
# writable by group or others. The build folder's contents are not walked: only root writes in a root-only folder.
need_root_only_checkout() {
    ((EUID == 0)) || return 0
    local checkout found
    checkout=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/../.." && pwd -P)
    need_root_only_dir "$checkout"
    found=$(find "$checkout" -xdev -path "$checkout/target/*" -prune -o \
        \( ! -uid 0 -o \( ! -type l -perm /022 \) \) -print -quit)
    [[ -z $found ]] || die "$found is another user's, or writable by group or others (mode $(stat -c %a -- "$found")):" \
        "root would run what they put in this checkout; run from a checkout only root can change"
}
