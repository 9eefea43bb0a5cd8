//! Slurm jobs under cosched. Slurm allocates, launches, accounts and limits; cosched time-slices the jobs Slurm
//! puts on shared nodes. The cosched SPANK plugin (`clients/slurm`) tells the controller of each job from Slurm's
//! prolog on its nodes (`SlurmBegin`), moves each task into the job's cgroup before it runs (`SlurmAttach`), and
//! ends the job from Slurm's epilog (`SlurmEnd`). See `docs/slurm.md`.
//!
//! Here: reading what Slurm's prolog environment says of the allocation, within bounds (the text comes from the
//! prolog, that is from root on a node, but every size is bounded before any work all the same).

/// The most nodes a Slurm job may name (a hostlist expands multiplicatively, so this bounds the work).
pub const MAX_SLURM_NODES: usize = 4096;
/// The longest hostlist or CPU-count text accepted.
pub const MAX_SLURM_TEXT: usize = 64 * 1024;
const MAX_NODE_NAME: usize = 64;

/// Expand a Slurm hostlist (`n[01-03,7],login`, `r[1-2]-n[1-2]`) into node names, in Slurm's order.
pub fn expand_hostlist(text: &str) -> Result<Vec<String>, String> {
    check_length("hostlist", text)?;
    let mut names = Vec::new();
    for item in split_top_level(text)? {
        if item.is_empty() {
            return Err(format!("hostlist {text:?}: an empty name"));
        }
        let mut expanded = vec![String::new()];
        for part in bracket_parts(item)? {
            let choices = match part {
                Part::Text(t) => vec![t.to_string()],
                Part::Ranges(r) => expand_ranges(r, text)?,
            };
            let count = expanded.len().saturating_mul(choices.len());
            if names.len().saturating_add(count) > MAX_SLURM_NODES {
                return Err(format!("hostlist {text:?} names more than {MAX_SLURM_NODES} nodes"));
            }
            expanded = expanded.iter().flat_map(|head| choices.iter().map(move |c| format!("{head}{c}"))).collect();
        }
        for name in &expanded {
            check_node_name(name)?;
        }
        names.extend(expanded);
    }
    Ok(names)
}

/// Expand Slurm's `SLURM_JOB_CPUS_PER_NODE` (`2(x3),1`) into one count per node; there must be `nodes` of them.
pub fn expand_cpus_per_node(text: &str, nodes: usize) -> Result<Vec<u32>, String> {
    check_length("CPU counts", text)?;
    let mut counts = Vec::new();
    for item in text.split(',') {
        let (count, repeat) = match item.split_once("(x") {
            Some((count, rest)) => {
                let repeat = rest.strip_suffix(')').ok_or_else(|| format!("CPU counts {text:?}: bad item {item:?}"))?;
                (count, parse_number(repeat, text)?)
            }
            None => (item, 1),
        };
        let count = u32::try_from(parse_number(count, text)?).map_err(|_| format!("CPU counts {text:?}: too large"))?;
        if count == 0 || repeat == 0 || counts.len() + repeat as usize > nodes {
            return Err(format!("CPU counts {text:?} do not give one positive count for each of {nodes} nodes"));
        }
        counts.extend(std::iter::repeat_n(count, repeat as usize));
    }
    if counts.len() != nodes {
        return Err(format!("CPU counts {text:?} give {} counts for {nodes} nodes", counts.len()));
    }
    Ok(counts)
}

enum Part<'a> {
    Text(&'a str),
    Ranges(&'a str),
}

fn check_length(what: &str, text: &str) -> Result<(), String> {
    if text.len() > MAX_SLURM_TEXT {
        return Err(format!("{what} of {} bytes: at most {MAX_SLURM_TEXT}", text.len()));
    }
    if text.is_empty() {
        return Err(format!("empty {what}"));
    }
    Ok(())
}

fn check_node_name(name: &str) -> Result<(), String> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || "-_.".contains(c);
    if name.len() > MAX_NODE_NAME || !name.chars().all(allowed) {
        return Err(format!("bad node name {name:?} (at most {MAX_NODE_NAME} of a-z, A-Z, 0-9, '-', '_', '.')"));
    }
    Ok(())
}

/// The hostlist's items: split at commas outside brackets.
fn split_top_level(text: &str) -> Result<Vec<&str>, String> {
    let (mut items, mut depth, mut start) = (Vec::new(), 0usize, 0);
    for (i, c) in text.char_indices() {
        match c {
            '[' if depth == 0 => depth = 1,
            ']' if depth == 1 => depth = 0,
            '[' | ']' => return Err(format!("hostlist {text:?}: unbalanced brackets")),
            ',' if depth == 0 => {
                items.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(format!("hostlist {text:?}: unbalanced brackets"));
    }
    items.push(&text[start..]);
    Ok(items)
}

/// One item's plain text and bracketed ranges, in order.
fn bracket_parts(item: &str) -> Result<Vec<Part<'_>>, String> {
    let mut parts = Vec::new();
    let mut rest = item;
    while let Some(open) = rest.find('[') {
        let close = rest[open..].find(']').map(|i| open + i).ok_or_else(|| format!("{item:?}: no ']'"))?;
        if open > 0 {
            parts.push(Part::Text(&rest[..open]));
        }
        parts.push(Part::Ranges(&rest[open + 1..close]));
        rest = &rest[close + 1..];
    }
    if !rest.is_empty() {
        parts.push(Part::Text(rest));
    }
    Ok(parts)
}

/// `01-03,7` → `01 02 03 7`: a range keeps the zero padding of its first bound.
fn expand_ranges(ranges: &str, text: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for range in ranges.split(',') {
        let (low, high) = range.split_once('-').unwrap_or((range, range));
        let (first, last) = (parse_number(low, text)?, parse_number(high, text)?);
        if last < first || last - first >= MAX_SLURM_NODES as u64 {
            return Err(format!("hostlist {text:?}: bad or too long range {range:?}"));
        }
        out.extend((first..=last).map(|n| format!("{n:0width$}", width = low.len())));
        if out.len() > MAX_SLURM_NODES {
            return Err(format!("hostlist {text:?} names more than {MAX_SLURM_NODES} nodes"));
        }
    }
    Ok(out)
}

fn parse_number(digits: &str, text: &str) -> Result<u64, String> {
    if digits.is_empty() || digits.len() > 9 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("{text:?}: {digits:?} is not a number"));
    }
    digits.parse().map_err(|_| format!("{text:?}: {digits:?} is not a number"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostlists_expand_as_slurm_writes_them() {
        assert_eq!(expand_hostlist("vm").unwrap(), ["vm"]);
        assert_eq!(expand_hostlist("n[1-3],login").unwrap(), ["n1", "n2", "n3", "login"]);
        assert_eq!(expand_hostlist("n[08-10,12]").unwrap(), ["n08", "n09", "n10", "n12"]);
        assert_eq!(expand_hostlist("r[1-2]-n[1-2]").unwrap(), ["r1-n1", "r1-n2", "r2-n1", "r2-n2"]);
        assert_eq!(expand_hostlist("a[1]b").unwrap(), ["a1b"]);
    }

    #[test]
    fn bad_or_huge_hostlists_are_refused_before_any_work() {
        for bad in ["", "n[1-3", "n1-3]", "n[[1]]", "n[3-1]", "n[a-b]", "a,,b", "n/../x", "n[1-99999999]"] {
            assert!(expand_hostlist(bad).is_err(), "{bad:?} accepted");
        }
        // A product of ranges that would name 10^6 nodes is refused by its count, not built.
        assert!(expand_hostlist("a[0-999]b[0-999]").unwrap_err().contains("more than"));
        assert!(expand_hostlist(&"n".repeat(MAX_SLURM_TEXT + 1)).is_err());
    }

    #[test]
    fn cpu_counts_expand_one_per_node() {
        assert_eq!(expand_cpus_per_node("2", 1).unwrap(), [2]);
        assert_eq!(expand_cpus_per_node("2(x3),1", 4).unwrap(), [2, 2, 2, 1]);
        for (bad, nodes) in [("2(x3)", 2), ("2", 2), ("0", 1), ("2(x3", 3), ("x", 1), ("2(x0)", 1)] {
            assert!(expand_cpus_per_node(bad, nodes).is_err(), "{bad:?} for {nodes} nodes accepted");
        }
    }
}
