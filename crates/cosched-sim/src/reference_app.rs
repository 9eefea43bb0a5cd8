//! The reference programs of `apps/` (spinbarrier, mpi_mm, mpi_lu) as
//! simulator applications. Their structure — tasks, synchronising exchanges
//! per task, the bytes of each — comes from the program's own parameters,
//! read from the command line that ran it; their timing from one dedicated
//! run of the program (its `t_1` and what it reported of itself). Nothing
//! comes from runs of several copies.
//!
//! The engine's application is a loop of compute → exchange with the ring
//! neighbours, the same for every iteration. A program maps onto it as
//! follows (docs/model.md, "The reference programs"):
//! - spinbarrier: one iteration per phase, the barrier an exchange of a
//!   cache line;
//! - mpi_mm on a `P×1` or `1×Q` grid: one iteration per panel, the panel's
//!   ring broadcast the exchange;
//! - mpi_lu on a `P×1` or `1×Q` grid: one iteration per synchronising
//!   exchange (per column the pivot's all-reduce and the pivot row's
//!   broadcast; per panel the row swaps and the U row), the compute spread
//!   evenly over them. The real program bunches a panel's `2·nb` small
//!   exchanges before its trailing update, whose work shrinks panel by
//!   panel: the model's even spread is its named simplification.
//!
//! Start-up and the final check (outside the program's timed region) are
//! the task's prologue: the CPU time the dedicated run used outside its
//! timed region, spread over the tasks, and the rest of that wall time
//! blocked.

use crate::app::{Program, Prologue, Rounds, Shrink};
use serde::Serialize;

/// A cache line: what one thread's arrival at a barrier moves.
const BARRIER_BYTES: u64 = 64;
/// A spinbarrier thread's x and y (512 pairs of doubles: it stays in L1).
const SPINBARRIER_WORKING_BYTES: u64 = 2 * 512 * DOUBLE_BYTES;
const DOUBLE_BYTES: u64 = 8;
/// Bounds on the parameters read from a command line (they size loops here).
const MAX_N: u64 = 1 << 20;
const MAX_TASKS: u32 = 4096;
const MAX_PHASES: u64 = 1 << 31;

/// How a task waits for a message or at a barrier.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize)]
pub enum WaitMode {
    Spin,
    Yield,
    Block,
}

/// A reference program and its parameters, as its command line gave them.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum ReferenceProgram {
    SpinBarrier { threads: u32, phases: u64, wait: WaitMode },
    MatrixMultiply { n: u64, p_rows: u32, q_cols: u32, k: u64, repeat: u64, wait: WaitMode },
    Lu { n: u64, p_rows: u32, q_cols: u32, nb: u64, wait: WaitMode },
}

/// What one task does, from the parameters alone.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Structure {
    pub tasks: u32,
    /// Synchronising exchanges of each task: the engine's iterations.
    pub exchanges: u64,
    /// Messages and doubles a task sends, averaged over the tasks, counted as
    /// the program counts them in its report (`messages_per_rank_mean`, `doubles_per_rank_mean`).
    pub messages_per_task: f64,
    pub doubles_per_task: f64,
    /// The bytes of one exchange's message.
    pub message_bytes: u64,
    /// The memory one task works over, as the program allocates it: what it refills of the
    /// caches after another job ran on its CPU.
    pub working_set_bytes: u64,
    /// Exchanges per round when they come in bursts between long updates (an LU's panels), else 0.
    pub exchanges_per_round: u32,
}

/// What one dedicated run (one copy alone) measured: the calibration.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct DedicatedRun {
    /// Wall time of the whole command, start-up and check included.
    pub elapsed_s: f64,
    /// CPU time of all the command's processes.
    pub cpu_s: f64,
    /// The program's own timed region, as it reported it.
    pub timed_s: f64,
    /// Compute time of a task inside the timed region, averaged over tasks.
    pub compute_s_mean: f64,
    /// CPU time of a task inside the timed region (computing and busy waiting).
    pub timed_cpu_s_mean: f64,
    /// Of `compute_s_mean`, the long updates between bursts of exchanges (mpi_lu's `update_s_mean`; 0 when the
    /// program does not report it).
    pub update_s_mean: f64,
}

impl ReferenceProgram {
    /// Read the program and its parameters from the command that ran it
    /// (through `mpirun -np p` for the MPI programs). An error says what is missing or out of range.
    pub fn from_command(command: &[String]) -> Result<ReferenceProgram, String> {
        let at = command
            .iter()
            .position(|a| ["spinbarrier", "mpi_mm", "mpi_lu"].contains(&program_name(a)))
            .ok_or("the command runs none of the reference programs (spinbarrier, mpi_mm, mpi_lu)")?;
        let flags = Flags(&command[at + 1..]);
        let wait = |name: &str, default: WaitMode| match flags.text(name) {
            None => Ok(default),
            Some("spin") => Ok(WaitMode::Spin),
            Some("yield") => Ok(WaitMode::Yield),
            Some("block") => Ok(WaitMode::Block),
            Some(other) => Err(format!("{name} '{other}' is not spin, yield or block")),
        };
        match program_name(&command[at]) {
            "spinbarrier" => Ok(ReferenceProgram::SpinBarrier {
                threads: flags.number("--threads", 2, MAX_TASKS as u64)? as u32,
                phases: flags.number("--phases", 1000, MAX_PHASES)?,
                wait: wait("--barrier", WaitMode::Spin)?,
            }),
            name => {
                let ranks = mpi_ranks(&command[..at])?;
                let (p_rows, q_cols) = flags.grid(ranks)?;
                let n = flags.number("--n", 0, MAX_N)?;
                if n == 0 {
                    return Err(format!("{name}: --n N is required"));
                }
                let wait = wait("--wait", WaitMode::Spin)?;
                if name == "mpi_mm" {
                    let (k, repeat) = (flags.number("--k", 128, MAX_N)?, flags.number("--repeat", 1, 1 << 20)?);
                    if k == 0 || repeat == 0 || n % p_rows as u64 != 0 || n % q_cols as u64 != 0 {
                        return Err("mpi_mm: --k and --repeat must be positive, --n divisible by P and Q".into());
                    }
                    Ok(ReferenceProgram::MatrixMultiply { n, p_rows, q_cols, k, repeat, wait })
                } else {
                    let nb = flags.number("--nb", 60, MAX_N)?;
                    if nb == 0 {
                        return Err("mpi_lu: --nb must be positive".into());
                    }
                    Ok(ReferenceProgram::Lu { n, p_rows, q_cols, nb, wait })
                }
            }
        }
    }

    pub fn wait(&self) -> WaitMode {
        match *self {
            ReferenceProgram::SpinBarrier { wait, .. }
            | ReferenceProgram::MatrixMultiply { wait, .. }
            | ReferenceProgram::Lu { wait, .. } => wait,
        }
    }

    /// The program's structure from its parameters; `Err` when the engine's
    /// one ring cannot carry it (a two-dimensional grid has a ring per row
    /// and per column).
    pub fn structure(&self) -> Result<Structure, String> {
        match *self {
            ReferenceProgram::SpinBarrier { threads, phases, .. } => Ok(Structure {
                tasks: threads,
                exchanges: phases,
                messages_per_task: 0.0,
                doubles_per_task: 0.0,
                message_bytes: BARRIER_BYTES,
                working_set_bytes: SPINBARRIER_WORKING_BYTES,
                exchanges_per_round: 0,
            }),
            ReferenceProgram::MatrixMultiply { n, p_rows, q_cols, k, repeat, .. } => {
                one_ring(p_rows, q_cols)?;
                Ok(matrix_multiply(n, p_rows, q_cols, k, repeat))
            }
            ReferenceProgram::Lu { n, p_rows, q_cols, nb, .. } => {
                one_ring(p_rows, q_cols)?;
                if q_cols > 1 {
                    return Err("mpi_lu on a 1xQ grid: the pivot search then has no partner (not modelled)".into());
                }
                Ok(lu(n, p_rows, nb))
            }
        }
    }

    /// The simulator's program for one task: the structure's exchanges,
    /// the dedicated run's compute spread over them, its time outside the
    /// timed region as the prologue.
    pub fn program(&self, run: &DedicatedRun) -> Result<(Structure, Program), String> {
        let structure = self.structure()?;
        run.check()?;
        let tasks = structure.tasks as f64;
        let exchanges = u32::try_from(structure.exchanges).map_err(|_| "more than 2^32 exchanges")?;
        let (compute_ns, rounds) = split_compute(&structure, run);
        let outside_s = (run.elapsed_s - run.timed_s).max(0.0);
        let outside_cpu_per_task_s = ((run.cpu_s - tasks * run.timed_cpu_s_mean) / tasks).clamp(0.0, outside_s);
        let prologue = Prologue {
            compute_ns: (outside_cpu_per_task_s * 1e9).round() as u64,
            blocked_ns: ((outside_s - outside_cpu_per_task_s) * 1e9).round() as u64,
        };
        let message_bytes = u32::try_from(structure.message_bytes).map_err(|_| "a message over 4 GiB")?;
        let program = Program {
            compute_ns,
            io_ns: 0,
            iterations: exchanges.max(1),
            message_bytes,
            prologue,
            working_set_bytes: structure.working_set_bytes,
            rounds,
            reads_cpu_clock: false,
            barrier: matches!(self, ReferenceProgram::SpinBarrier { .. }),
        };
        Ok((structure, program))
    }
}

/// The compute of an exchange, and the rounds: the dedicated run's compute spread evenly over the exchanges, or,
/// for a program of rounds that reported its updates, the updates as each round's long compute (shrinking as
/// an LU's trailing matrix) and the rest spread over the other exchanges.
fn split_compute(structure: &Structure, run: &DedicatedRun) -> (u64, Rounds) {
    let exchanges = structure.exchanges.max(1) as f64;
    let per_round = structure.exchanges_per_round as u64;
    let update_s = run.update_s_mean.min(run.compute_s_mean);
    if per_round < 2 || update_s <= 0.0 {
        return ((run.compute_s_mean * 1e9 / exchanges).round() as u64, Rounds::NONE);
    }
    let rounds = structure.exchanges.div_ceil(per_round) as f64;
    let round_ends = (structure.exchanges / per_round) as f64;
    let short_ns = ((run.compute_s_mean - update_s) * 1e9 / (exchanges - round_ends).max(1.0)).round() as u64;
    let rounds = Rounds {
        iterations: structure.exchanges_per_round,
        long_compute_mean_ns: (update_s * 1e9 / rounds).round() as u64,
        shrink: Shrink::Quadratic,
    };
    (short_ns, rounds)
}

impl DedicatedRun {
    fn check(&self) -> Result<(), String> {
        let values =
            [self.elapsed_s, self.cpu_s, self.timed_s, self.compute_s_mean, self.timed_cpu_s_mean, self.update_s_mean];
        if values.iter().any(|v| !v.is_finite() || *v < 0.0 || *v > 1e6) {
            return Err(format!("the dedicated run's figures must be seconds in [0, 10^6]: {self:?}"));
        }
        if self.elapsed_s <= 0.0 || self.timed_s <= 0.0 || self.compute_s_mean <= 0.0 {
            return Err("the dedicated run took no time, or reported no timed region or no compute".into());
        }
        Ok(())
    }
}

/// The ring of a grid that has only one: its length.
fn one_ring(p_rows: u32, q_cols: u32) -> Result<u32, String> {
    match (p_rows, q_cols) {
        (p, 1) => Ok(p),
        (1, q) => Ok(q),
        (p, q) => Err(format!("a {p}x{q} grid has a ring per process row and per column; the engine models one ring")),
    }
}

/// mpi_mm's panels: at most `k` wide, cut where the owner of the column
/// block (multiples of N/Q) or of the row block (multiples of N/P) changes.
fn mm_panels(n: u64, p_rows: u32, q_cols: u32, k: u64) -> Vec<(u64, u64)> {
    let (mb, nbk) = (n / p_rows as u64, n / q_cols as u64);
    let mut panels = Vec::new();
    let mut k0 = 0;
    while k0 < n {
        let end = (k0 + k).min((k0 / nbk + 1) * nbk).min((k0 / mb + 1) * mb).min(n);
        panels.push((k0, end - k0));
        k0 = end;
    }
    panels
}

/// Sends of a ring broadcast over `size` ranks: everyone but the root's predecessor forwards.
fn ring_sends(size: u32) -> u64 {
    size.saturating_sub(1) as u64
}

fn matrix_multiply(n: u64, p_rows: u32, q_cols: u32, k: u64, repeat: u64) -> Structure {
    let (mb, nbk) = (n / p_rows as u64, n / q_cols as u64);
    let tasks = p_rows * q_cols;
    let (mut messages, mut doubles) = (0u64, 0u64);
    let panels = mm_panels(n, p_rows, q_cols, k);
    for &(_, kw) in &panels {
        // The column panel (mb x kw) along the process row, the row panel (kw x nbk) down the column.
        let row_sends = ring_sends(q_cols) * p_rows as u64;
        let column_sends = ring_sends(p_rows) * q_cols as u64;
        messages += row_sends + column_sends;
        doubles += row_sends * mb * kw + column_sends * kw * nbk;
    }
    let exchanges = panels.len() as u64 * repeat;
    // Its blocks of A and C, and the two panels it receives.
    let working_doubles = 2 * mb * nbk + mb * k.min(n) + k.min(n) * nbk;
    let per_task = |total: u64| total as f64 * repeat as f64 / tasks as f64;
    let bytes_per_message = (doubles * DOUBLE_BYTES).checked_div(messages).unwrap_or(0);
    Structure {
        tasks,
        exchanges,
        messages_per_task: per_task(messages),
        doubles_per_task: per_task(doubles),
        message_bytes: bytes_per_message,
        working_set_bytes: working_doubles.saturating_mul(DOUBLE_BYTES),
        exchanges_per_round: 0,
    }
}

/// mpi_lu on a `P×1` grid: per column, the pivot's all-reduce (a message
/// of every rank) and the pivot row's broadcast (one of its root); per
/// panel, the U block row down the ring. The row swaps (point to point,
/// as the pivots fall) depend on the matrix and are not counted.
fn lu(n: u64, p_rows: u32, nb: u64) -> Structure {
    let mut exchanges = 0u64;
    let (mut messages, mut doubles) = (0u64, 0u64);
    let mut k0 = 0;
    while k0 < n && p_rows > 1 {
        let jb = nb.min(n - k0);
        // Pivot search: every rank contributes one (value, row) pair; the pivot row: jb doubles from its owner.
        messages += jb * (p_rows as u64 + 1);
        doubles += jb * (p_rows as u64 + jb);
        // The U block row, jb x (N + 1 - k0 - jb), by ring shift from the diagonal block's owner.
        let senders = ring_sends(p_rows);
        messages += senders;
        doubles += senders * jb * (n + 1 - k0 - jb);
        // Synchronising exchanges: two per column, and per panel the row swaps and the U row.
        exchanges += 2 * jb + 2;
        k0 += jb;
    }
    let tasks = p_rows;
    let bytes_per_message = (doubles * DOUBLE_BYTES).checked_div(messages).unwrap_or(0);
    // Its rows of [A b] (the trailing part it updates shrinks; the first panels touch all of it).
    let working_doubles = n.div_ceil(p_rows.max(1) as u64) * (n + 1);
    Structure {
        tasks,
        exchanges,
        messages_per_task: messages as f64 / tasks as f64,
        doubles_per_task: doubles as f64 / tasks as f64,
        message_bytes: bytes_per_message,
        working_set_bytes: working_doubles.saturating_mul(DOUBLE_BYTES),
        // A panel: its columns' exchanges, then the U row and the trailing matrix's update (the last may be short).
        exchanges_per_round: (2 * nb.min(n) + 2) as u32,
    }
}

fn program_name(arg: &str) -> &str {
    arg.rsplit('/').next().unwrap_or(arg)
}

/// `-np p` (or `-n`, `--np`) of the launcher before the program; 1 without one.
fn mpi_ranks(launcher: &[String]) -> Result<u32, String> {
    let flags = Flags(launcher);
    for name in ["-np", "-n", "--np", "-c"] {
        if flags.text(name).is_some() {
            return Ok(flags.number(name, 1, MAX_TASKS as u64)? as u32);
        }
    }
    Ok(1)
}

/// A program's `--name value` or `--name=value` flags.
struct Flags<'a>(&'a [String]);

impl Flags<'_> {
    fn text(&self, name: &str) -> Option<&str> {
        let mut last = None;
        for (i, arg) in self.0.iter().enumerate() {
            if arg == name {
                last = self.0.get(i + 1).map(String::as_str);
            } else if let Some(value) = arg.strip_prefix(name).and_then(|rest| rest.strip_prefix('=')) {
                last = Some(value);
            }
        }
        last
    }

    fn number(&self, name: &str, default: u64, max: u64) -> Result<u64, String> {
        match self.text(name) {
            None => Ok(default),
            Some(text) => text
                .parse::<u64>()
                .ok()
                .filter(|v| (1..=max).contains(v))
                .ok_or(format!("{name} '{text}' is not a whole number in 1..={max}")),
        }
    }

    /// `--grid PxQ`, or `p x 1` without one (as the programs default).
    fn grid(&self, ranks: u32) -> Result<(u32, u32), String> {
        let Some(text) = self.text("--grid") else { return Ok((ranks, 1)) };
        let parsed =
            text.split_once(['x', 'X']).and_then(|(p, q)| Some((p.parse::<u32>().ok()?, q.parse::<u32>().ok()?)));
        match parsed {
            Some((p, q)) if p >= 1 && q >= 1 && p.checked_mul(q) == Some(ranks) => Ok((p, q)),
            _ => Err(format!("--grid '{text}' is not PxQ with P·Q = {ranks} ranks")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::{Rounds, Shrink};

    fn command(text: &str) -> Vec<String> {
        text.split_whitespace().map(String::from).collect()
    }

    const MM: &str = "mpirun --allow-run-as-root --oversubscribe --bind-to none --mca btl self,vader \
                      -x OPENBLAS_NUM_THREADS=1 -np 2 ./mpi_mm --n 4096 --grid 2x1 --wait spin";
    const LU: &str = "mpirun --allow-run-as-root -np 2 ./mpi_lu --n 6000 --grid 2x1 --wait spin";

    /// mpi_mm at N = 4096 on 2x1 with k = 128: 32 panels, each owned in turn
    /// by the two ranks, each passed once to the other — 16 messages of
    /// 128 x 4096 doubles per rank, as the program itself reported
    /// (messages_per_rank 16, doubles_per_rank 8388608, docs/reproduction-real/mm-p2-spin/report.json).
    #[test]
    fn matrix_multiply_structure_is_the_programs_own() {
        let program = ReferenceProgram::from_command(&command(MM)).unwrap();
        let s = program.structure().unwrap();
        assert_eq!((s.tasks, s.exchanges), (2, 32));
        assert_eq!((s.messages_per_task, s.doubles_per_task), (16.0, 8_388_608.0));
        assert_eq!(s.message_bytes, 128 * 4096 * 8);
    }

    /// mpi_lu at N = 6000, nb = 60 on 2x1: 100 panels; per column one
    /// message of each rank in the pivot search and one pivot row; the
    /// program reported 10681.5 messages per rank on average, the row swaps
    /// (which depend on the matrix) making the difference from the 9050 counted here.
    #[test]
    fn lu_structure_counts_the_synchronising_exchanges() {
        let s = ReferenceProgram::from_command(&command(LU)).unwrap().structure().unwrap();
        assert_eq!((s.tasks, s.exchanges), (2, 2 * 6000 + 2 * 100));
        // Columns: 6000 · (2 + 1) messages; panels: one U row each.
        assert_eq!(s.messages_per_task, (6000.0 * 3.0 + 100.0) / 2.0);
        assert!(s.messages_per_task < 10_681.5);
    }

    #[test]
    fn spin_barrier_has_a_barrier_per_phase() {
        let c = command("./spinbarrier --threads 2 --phases 30000 --work-mflop 1 --barrier spin --no-check");
        let program = ReferenceProgram::from_command(&c).unwrap();
        assert_eq!(program, ReferenceProgram::SpinBarrier { threads: 2, phases: 30_000, wait: WaitMode::Spin });
        let s = program.structure().unwrap();
        assert_eq!((s.tasks, s.exchanges, s.message_bytes), (2, 30_000, 64));
    }

    /// The dedicated run's compute is spread over the exchanges; what it did
    /// outside its timed region is the prologue, CPU first.
    #[test]
    fn the_program_comes_from_one_dedicated_run() {
        let program = ReferenceProgram::from_command(&command(MM)).unwrap();
        let run = DedicatedRun {
            elapsed_s: 2.2,
            cpu_s: 3.6,
            timed_s: 1.4,
            compute_s_mean: 1.28,
            timed_cpu_s_mean: 1.4,
            update_s_mean: 0.0,
        };
        let (_, p) = program.program(&run).unwrap();
        assert_eq!((p.iterations, p.compute_ns, p.message_bytes), (32, 40_000_000, 4_194_304));
        // Outside: 0.8 s of wall time, (3.6 − 2·1.4)/2 = 0.4 s of CPU per task.
        assert_eq!(p.prologue, Prologue { compute_ns: 400_000_000, blocked_ns: 400_000_000 });
        let bad = DedicatedRun { timed_s: f64::NAN, ..run };
        assert!(program.program(&bad).unwrap_err().contains("seconds"));
    }

    /// mpi_lu reports its updates (U row and trailing matrix) apart: they become each panel's long compute, the
    /// rest of its compute is spread over the other exchanges.
    #[test]
    fn an_lus_updates_end_its_panels_and_the_rest_is_spread_between_its_exchanges() {
        let program = ReferenceProgram::from_command(&command("mpirun -np 2 ./mpi_lu --n 600 --grid 2x1")).unwrap();
        let run = DedicatedRun {
            elapsed_s: 1.0,
            cpu_s: 2.0,
            timed_s: 0.5,
            compute_s_mean: 0.4,
            timed_cpu_s_mean: 0.5,
            update_s_mean: 0.3,
        };
        let (structure, p) = program.program(&run).unwrap();
        // 10 panels of 60 columns, 2·60 + 2 exchanges each.
        assert_eq!((structure.exchanges, structure.exchanges_per_round), (1_220, 122));
        assert_eq!(p.rounds, Rounds { iterations: 122, long_compute_mean_ns: 30_000_000, shrink: Shrink::Quadratic });
        // 0.1 s over the 1,210 exchanges that end no panel.
        assert_eq!(p.compute_ns, (1e8 / 1_210.0f64).round() as u64);
        let total_s = p.iterations_compute_ns() as f64 / 1e9;
        assert!((total_s - (0.3 + 0.1 * 1_210.0 / 1_210.0)).abs() < 1e-6, "{total_s}");
        // Without a report of its updates (older reports, other programs) the compute is even.
        let (_, even) = program.program(&DedicatedRun { update_s_mean: 0.0, ..run }).unwrap();
        assert_eq!((even.rounds, even.compute_ns), (Rounds::NONE, (4e8 / 1_220.0f64).round() as u64));
    }

    #[test]
    fn what_the_engine_cannot_carry_says_why() {
        let two_d = command("mpirun -np 4 ./mpi_mm --n 3072 --grid 2x2");
        let why = ReferenceProgram::from_command(&two_d).unwrap().structure().unwrap_err();
        assert!(why.contains("one ring"), "{why}");
        for (bad, expect) in [
            ("mpirun -np 2 ./mpi_mm --grid 2x1", "--n"),
            ("mpirun -np 2 ./mpi_mm --n 10 --grid 3x1", "--grid"),
            ("./spinbarrier --barrier sometimes", "--barrier"),
            ("./spinbarrier --threads 0", "--threads"),
            ("mpirun -np 2 ./other", "none of the reference programs"),
        ] {
            let err = ReferenceProgram::from_command(&command(bad)).unwrap_err();
            assert!(err.contains(expect), "{bad}: {err}");
        }
    }
}
