//! Gang scheduling's node side: a CPU runs only the process of the current
//! row's cell on it (set by the gang quantum), with no scheduler of its own.
//! The gang quantum (`GangQuantum`) is the gang cell's record of the whole
//! machine: jobs' starts and finishes fill and empty its cells, a change of
//! plan rebuilds them, and its own event is the quantum's boundary, where
//! every CPU switches to the next row's cells.

use super::NodeScheduler;
use crate::config::SimConfig;
use crate::engine::records::{ProcState, NO_PROC, NO_ROW};
use crate::engine::view::Host;
use crate::trace::TraceKind;
use cosched_core::SimTime;
use cosched_policy::cluster::{Rotation, Switching};
use cosched_policy::{Coscheduler, Mode};

pub(crate) struct GangCell;

/// A CPU under gang scheduling.
#[derive(Default)]
pub(crate) struct GangCpu {
    /// The process of the current row's cell on this CPU.
    cell: Option<u32>,
}

/// What the gang cell's hooks see of the engine.
pub(crate) trait GangHost: Host<NodeCpu = GangCpu, NodeProc = (), NodeMachine = GangQuantum> {}

impl<H: Host<NodeCpu = GangCpu, NodeProc = (), NodeMachine = GangQuantum>> GangHost for H {}

impl NodeScheduler for GangCell {
    type Cpu = GangCpu;
    type Proc = ();
    type Machine = GangQuantum;
    const MODE: Mode = Mode::Gang;
    const CHARGES_DISPATCH_SWITCH: bool = false;

    fn new_proc(_: &SimConfig, _: i8, _: bool) {}

    fn new_machine(cfg: &SimConfig, cosched: &Coscheduler) -> GangQuantum {
        GangQuantum::for_run(cfg, cosched)
    }

    /// Its cells are filled; its CPUs take them at once if it runs now.
    fn job_started<H: GangHost>(engine: &mut H, rows: &[u32], cpus: &[u32], first_proc: u32, _: u32, _: SimTime) {
        let waits = engine.cfg().costs.gang_start_waits_for_quantum;
        if engine.node_machine_mut().place(rows, cpus, first_proc, waits) {
            for (rank, &cpu) in cpus.iter().enumerate() {
                engine.cpu_mut(cpu).sched.cell = Some(first_proc + rank as u32);
            }
        }
    }

    /// Its cells empty; its CPUs lose them if its row runs now.
    fn job_finished<H: GangHost>(engine: &mut H, rows: &[u32], cpus: &[u32], jobs_running: usize) {
        if engine.node_machine_mut().release(rows, cpus, jobs_running) {
            for &cpu in cpus {
                engine.cpu_mut(cpu).sched.cell = None;
            }
        }
    }

    /// When the coscheduler may move running jobs' rows or pick the slot by
    /// the clock: rebuild the cells from the plan, and put every CPU whose
    /// cell changed on its new process at once (no gang switch: the slot goes on; the cache refill is paid).
    fn plan_changed<H: GangHost>(engine: &mut H, now: SimTime) {
        let Some(row) = realign_row(engine, now) else { return };
        for c in 0..engine.cfg().cpu_count() {
            let cell = engine.node_machine().cell_process(row, c);
            if engine.cpu(c).sched.cell != cell {
                engine.account(c, now);
                put_on_cell(engine, c, cell, now);
                // No switch is paid, but the caches hold the last job's data.
                let refill_ns = cache_refill_ns(engine, c, cell);
                engine.cpu_mut(c).add_kernel_work(now, refill_ns);
                engine.visit(c, now);
            }
        }
    }

    /// Book the next quantum boundary if some other row is waiting for its
    /// turn, or (the study's reading) while any row holds jobs.
    fn jobs_changed<H: GangHost>(engine: &mut H, now: SimTime) {
        book_boundary_if_due(engine, now);
    }

    /// A quantum boundary: every CPU switches to the next row if a switch is due.
    fn on_event<H: GangHost>(engine: &mut H, now: SimTime) {
        if let Some(next) = row_at_boundary(engine, now) {
            switch_all_cpus_to_row(engine, next, now);
        }
        book_boundary_if_due(engine, now);
    }

    fn running_row(quantum: &GangQuantum) -> Option<u32> {
        quantum.current_row()
    }

    fn cells(quantum: &GangQuantum) -> &[u32] {
        quantum.cells()
    }

    fn admit<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(_: &mut H, _: u32, _: u32) {}

    fn charge(_: &mut GangCpu, _: &mut (), _: u64, _: SimTime, _: bool) {}

    /// The cell stays the process's: the CPU idles until it wakes.
    fn blocked<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(_: &mut H, _: u32, _: u32) {}

    fn dispatched<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(_: &mut H, _: u32, _: u32) {}

    fn preempt_for(_: &mut GangCpu, _: u32) {}

    fn yield_below_others<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(
        _: &mut H,
        _: u32,
        _: u32,
    ) -> Option<u8> {
        unreachable!("spin-yield runs under the MLFQ only")
    }

    fn exited(cpu: &mut GangCpu, p: u32) {
        if cpu.cell == Some(p) {
            cpu.cell = None;
        }
    }

    fn on_visit<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(_: &mut H, _: u32, _: SimTime) {}

    fn on_visit_due_at<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(_: &H, _: u32, _: SimTime) -> SimTime {
        SimTime::MAX
    }

    fn acts_at<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(_: &H, _: u32, _: SimTime) -> SimTime {
        SimTime::MAX
    }

    fn tick<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(_: &mut H, _: u32, _: SimTime) {}

    fn tick_passed<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(_: &mut H, _: u32, _: SimTime) {}

    fn has_ready<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &H, c: u32) -> bool {
        ready_cell(engine, c).is_some()
    }

    fn pick_next<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &mut H, c: u32) -> Option<u32> {
        ready_cell(engine, c)
    }

    fn make_ready<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(_: &mut H, _: u32) {}

    fn favour<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(_: &mut H, _: u32) {}

    /// The cell's process is the running one: a wake matters only when
    /// something else makes the engine look (the gang quantum).
    fn wake_noticed_at<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(_: &H, _: u32, _: SimTime) -> SimTime {
        SimTime::MAX
    }

    fn idle_while_blocked<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(_: &H, _: u32) -> bool {
        true
    }

    fn preempts_at<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(
        _: &H,
        _: u32,
        _: u32,
        _: SimTime,
        _: SimTime,
    ) -> SimTime {
        SimTime::MAX
    }
}

/// The current row's process on CPU `c`, if it is ready to run.
fn ready_cell<H: Host<NodeCpu = GangCpu>>(engine: &H, c: u32) -> Option<u32> {
    engine.cpu(c).sched.cell.filter(|&p| engine.proc(p).state == ProcState::Ready)
}

/// A node scheduler's record of the whole machine that holds the gang quantum (the gang cell's is the quantum;
/// gang slots over EEVDF keep more beside it).
pub(crate) trait HoldsQuantum: Default {
    fn quantum(&self) -> &GangQuantum;
    fn quantum_mut(&mut self) -> &mut GangQuantum;
}

impl HoldsQuantum for GangQuantum {
    fn quantum(&self) -> &GangQuantum {
        self
    }
    fn quantum_mut(&mut self) -> &mut GangQuantum {
        self
    }
}

/// The gang slice holding `now` (slices start at multiples of the quantum).
fn slice_at<H: Host>(engine: &H, now: SimTime) -> u64 {
    now.ns() / engine.cfg().costs.gang_quantum_ns
}

/// The matrix row to run in `slice`, after the current one.
fn row_to_run<H: Host<NodeMachine: HoldsQuantum>>(engine: &H, slice: u64) -> Option<u32> {
    engine.coscheduler().row_to_run(engine.node_machine().quantum().current_row(), slice)
}

/// Each cell's process, from the coscheduler's rows for every placed job.
fn rebuild_cells<H: Host<NodeMachine: HoldsQuantum>>(engine: &mut H) {
    // Taken out while the engine's jobs are read (an empty record costs nothing to make).
    let mut quantum = std::mem::take(engine.node_machine_mut().quantum_mut());
    quantum.clear_cells();
    engine.placed_jobs(|rows, cpus, first_proc, _| quantum.fill_job(rows, cpus, first_proc));
    *engine.node_machine_mut().quantum_mut() = quantum;
}

/// After a change of plan at `now`, when the coscheduler may move running jobs' rows or picks the slot by the
/// clock: the cells rebuilt, the row that runs now, set as the current one. `None`: nothing to realign.
pub(crate) fn realign_row<H: Host<NodeMachine: HoldsQuantum>>(engine: &mut H, now: SimTime) -> Option<Option<u32>> {
    if !engine.node_machine().quantum().follows_every_plan() {
        return None;
    }
    rebuild_cells(engine);
    let row = match engine.coscheduler().settings().rules.rotation {
        Rotation::ClockAligned => row_to_run(engine, slice_at(engine, now)),
        Rotation::NextOccupiedRow => engine.node_machine().quantum().current_row(),
    };
    engine.node_machine_mut().quantum_mut().set_current_row(row);
    Some(row)
}

/// Book the next quantum boundary if some other row is waiting for its turn, or (the study's reading) while any
/// row holds jobs.
pub(crate) fn book_boundary_if_due<H: Host<NodeMachine: HoldsQuantum>>(engine: &mut H, now: SimTime) {
    if engine.node_machine().quantum().boundary_booked() || engine.coscheduler().slot_count() == 0 {
        return;
    }
    let boundary = now.next_multiple_after(engine.cfg().costs.gang_quantum_ns);
    let next = row_to_run(engine, slice_at(engine, boundary));
    if engine.node_machine().quantum().switch_due(next, switch_every_quantum(engine)) {
        engine.node_machine_mut().quantum_mut().book_boundary();
        engine.book_scheduler_event(boundary);
    }
}

/// The booked quantum boundary is reached at `now`: the row the CPUs switch to, if a switch is due.
pub(crate) fn row_at_boundary<H: Host<NodeMachine: HoldsQuantum>>(engine: &mut H, now: SimTime) -> Option<Option<u32>> {
    engine.node_machine_mut().quantum_mut().boundary_reached();
    if engine.coscheduler().slot_count() == 0 {
        return None;
    }
    let next = row_to_run(engine, slice_at(engine, now));
    let every_quantum = switch_every_quantum(engine);
    engine.node_machine_mut().quantum_mut().cross_boundary(next, every_quantum).then_some(next)
}

/// CPU `c` leaves whatever it runs for `cell`'s process (accounted up to `now`).
fn put_on_cell<H: GangHost>(engine: &mut H, c: u32, cell: Option<u32>, now: SimTime) {
    if let Some(p) = engine.cpu(c).running {
        engine.proc_mut(p).state = ProcState::Ready;
        engine.release_cpu(c, now, crate::metrics::SwitchCause::Gang);
    }
    engine.cpu_mut(c).sched.cell = cell;
}

/// What `cell`'s process pays to refill CPU `c`'s caches: nothing if it ran there last, or
/// nothing ran there yet.
fn cache_refill_ns<H: GangHost>(engine: &H, c: u32, cell: Option<u32>) -> u64 {
    match (cell, engine.cpu(c).last_process) {
        (Some(p), Some(last)) if last != p => engine.cache_refill_ns(p),
        _ => 0,
    }
}

/// Whether every boundary is crossed, also where the rows do not change: the study's reading
/// (each crossing costs every CPU a switch), and cosched's agents, which wake at every slice
/// boundary and switch only the cells that change (`switch_all_cpus_to_row`).
fn switch_every_quantum<H: Host>(engine: &H) -> bool {
    match engine.coscheduler().settings().rules.switching {
        Switching::EveryCpu => engine.cfg().costs.gang_switch_every_quantum,
        Switching::ChangedCells => true,
    }
}

/// Every CPU switches to `row`'s cells, paying a gang switch and the incoming process's cache
/// refill; under `Switching::ChangedCells` a CPU whose cell stays pays nothing and goes on.
fn switch_all_cpus_to_row<H: GangHost>(engine: &mut H, row: Option<u32>, now: SimTime) {
    let switch_ns = engine.cfg().costs.gang_switch_ns;
    let changed_only = engine.coscheduler().settings().rules.switching == Switching::ChangedCells;
    for c in 0..engine.cfg().cpu_count() {
        let cell = engine.node_machine().cell_process(row, c);
        let changed = engine.cpu(c).sched.cell != cell;
        if changed_only && !changed {
            continue;
        }
        engine.account(c, now);
        put_on_cell(engine, c, cell, now);
        let refill_ns = cache_refill_ns(engine, c, cell);
        engine.cpu_mut(c).add_kernel_work(now, switch_ns + refill_ns);
        engine.record(now, c, TraceKind::GangSwitch { row: row.unwrap_or(NO_ROW), cell });
        engine.visit(c, now);
    }
}

/// The gang quantum's state, shared by all CPUs: the matrix row that runs and
/// each cell's process, with the rules that change them.
#[derive(Clone, Debug, Default)]
pub(crate) struct GangQuantum {
    /// The matrix row that runs (`None`: no gang job runs, or a slot left to local jobs).
    current_row: Option<u32>,
    /// A boundary is booked in the event queue.
    boundary_booked: bool,
    /// Process of each cell, row-major like the matrix (`NO_PROC`: empty).
    cell_procs: Vec<u32>,
    /// A `u32`: the record stays the 40 bytes the engine's `Option` of it held.
    cpu_count: u32,
    /// The coscheduler may move a running job's rows (fill-ins) or pick the
    /// slot by the clock: cells are rebuilt and realigned after every change.
    follows_every_plan: bool,
    /// A job was placed in the running row and waits for the next quantum
    /// (`CostConfig::gang_start_waits_for_quantum`): the boundary must switch.
    cells_pending: bool,
}

impl GangQuantum {
    /// The quantum of a run: cells rebuilt after every change of plan when the coscheduler may move a running
    /// job's rows or picks the slot by the clock.
    pub(crate) fn for_run(cfg: &SimConfig, cosched: &Coscheduler) -> GangQuantum {
        let rules = cosched.settings().rules;
        let follows_every_plan = rules.fill_free_cells || rules.rotation == Rotation::ClockAligned;
        GangQuantum::new(cfg.mpl as usize, cfg.cpu_count() as usize, follows_every_plan)
    }

    pub(crate) fn new(rows: usize, cpu_count: usize, follows_every_plan: bool) -> Self {
        GangQuantum {
            current_row: None,
            boundary_booked: false,
            cell_procs: vec![NO_PROC; rows * cpu_count],
            cpu_count: cpu_count as u32,
            follows_every_plan,
            cells_pending: false,
        }
    }

    pub(crate) fn current_row(&self) -> Option<u32> {
        self.current_row
    }

    pub(crate) fn set_current_row(&mut self, row: Option<u32>) {
        self.current_row = row;
    }

    pub(crate) fn follows_every_plan(&self) -> bool {
        self.follows_every_plan
    }

    /// Every cell's process, row-major (`NO_PROC`: empty).
    pub(crate) fn cells(&self) -> &[u32] {
        &self.cell_procs
    }

    /// The process of `row`'s cell on CPU `c`, if any.
    pub(crate) fn cell_process(&self, row: Option<u32>, c: u32) -> Option<u32> {
        let cell = row.map_or(NO_PROC, |r| self.cell_procs[r as usize * self.cpu_count as usize + c as usize]);
        (cell != NO_PROC).then_some(cell)
    }

    /// Every cell empty.
    fn clear_cells(&mut self) {
        self.cell_procs.fill(NO_PROC);
    }

    /// A job whose rank `i` is process `first_proc + i` on `cpus[i]`, in `rows`.
    fn fill_job(&mut self, rows: &[u32], cpus: &[u32], first_proc: u32) {
        self.fill(rows, cpus, |rank| first_proc + rank as u32);
    }

    /// Cells of `rows` on `cpus`, rank `i`'s set to `proc_of_rank(i)`.
    fn fill(&mut self, rows: &[u32], cpus: &[u32], proc_of_rank: impl Fn(usize) -> u32) {
        for &row in rows {
            for (rank, &cpu) in cpus.iter().enumerate() {
                self.cell_procs[row as usize * self.cpu_count as usize + cpu as usize] = proc_of_rank(rank);
            }
        }
    }

    /// A job starts in `rows`: its cells are filled. True when its CPUs must
    /// be put on its processes at once (it runs in the row that runs now and
    /// need not wait for the boundary). An idle machine starts the new row
    /// at once, with no switch to pay.
    pub(crate) fn place(&mut self, rows: &[u32], cpus: &[u32], first_proc: u32, start_waits_for_quantum: bool) -> bool {
        self.fill_job(rows, cpus, first_proc);
        if self.follows_every_plan {
            return false; // the CPUs are realigned once every job has started (`plan_changed`)
        }
        let machine_idle = self.current_row.is_none();
        let current = *self.current_row.get_or_insert(rows[0]);
        if !machine_idle && start_waits_for_quantum {
            // Its cells are filled at the next boundary, like every other row's.
            self.cells_pending |= rows.contains(&current);
            return false;
        }
        rows.contains(&current)
    }

    /// A job in `rows` finishes: its cells empty. True when the row that runs
    /// now held it (its CPUs lose their cell). With no job left, no row runs.
    pub(crate) fn release(&mut self, rows: &[u32], cpus: &[u32], jobs_left: usize) -> bool {
        self.fill(rows, cpus, |_| NO_PROC);
        let ran_now = self.current_row.is_some_and(|row| rows.contains(&row));
        if jobs_left == 0 {
            self.current_row = None;
        }
        ran_now
    }

    /// Whether a boundary whose row is `next` switches the CPUs.
    pub(crate) fn switch_due(&self, next: Option<u32>, switch_every_quantum: bool) -> bool {
        switch_every_quantum || next != self.current_row || self.cells_pending
    }

    pub(crate) fn boundary_booked(&self) -> bool {
        self.boundary_booked
    }

    pub(crate) fn book_boundary(&mut self) {
        self.boundary_booked = true;
    }

    /// The booked boundary is reached.
    pub(crate) fn boundary_reached(&mut self) {
        self.boundary_booked = false;
    }

    /// At a boundary: `next` runs if a switch is due (then true).
    pub(crate) fn cross_boundary(&mut self, next: Option<u32>, switch_every_quantum: bool) -> bool {
        if !self.switch_due(next, switch_every_quantum) {
            return false;
        }
        self.current_row = next;
        self.cells_pending = false;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two rows on two CPUs, rows chosen by the next occupied row.
    fn quantum() -> GangQuantum {
        GangQuantum::new(2, 2, false)
    }

    #[test]
    fn an_idle_machine_runs_a_new_job_at_once_even_when_starts_wait() {
        let mut gang = quantum();
        assert!(gang.place(&[1], &[0, 1], 10, true), "the first job's CPUs take its cells at once");
        assert_eq!(gang.current_row(), Some(1));
        assert_eq!((gang.cell_process(Some(1), 0), gang.cell_process(Some(1), 1)), (Some(10), Some(11)));
        assert_eq!(gang.cell_process(Some(0), 0), None);
    }

    #[test]
    fn a_job_placed_in_the_running_row_waits_for_the_boundary_when_told() {
        let mut gang = quantum();
        gang.place(&[0], &[0], 10, true);
        assert!(!gang.switch_due(Some(0), false), "one row, nothing pending: no switch");
        assert!(!gang.place(&[0], &[1], 20, true), "the second job waits for the boundary");
        assert!(gang.switch_due(Some(0), false), "the boundary must switch to fill its cell");
        assert!(gang.cross_boundary(Some(0), false));
        assert!(!gang.switch_due(Some(0), false), "filled: the next boundary has nothing to do");
        let mut at_once = quantum();
        at_once.place(&[0], &[0], 10, false);
        assert!(at_once.place(&[0], &[1], 20, false), "not told to wait: it runs in the running row at once");
    }

    #[test]
    fn a_job_in_another_row_starts_at_its_turn() {
        let mut gang = quantum();
        gang.place(&[0], &[0, 1], 10, false);
        assert!(!gang.place(&[1], &[0, 1], 20, false), "row 1 is not the running one");
        assert!(gang.switch_due(Some(1), false));
        assert!(gang.cross_boundary(Some(1), false));
        assert_eq!(gang.cell_process(gang.current_row(), 1), Some(21));
    }

    #[test]
    fn releasing_the_running_row_empties_its_cells_and_the_last_job_stops_the_rows() {
        let mut gang = quantum();
        gang.place(&[0], &[0, 1], 10, false);
        gang.place(&[1], &[0], 20, false);
        assert!(!gang.release(&[1], &[0], 1), "row 1 does not run now");
        assert_eq!(gang.current_row(), Some(0));
        assert!(gang.release(&[0], &[0, 1], 0), "row 0 ran: its CPUs lose their cells");
        assert_eq!(gang.current_row(), None, "no job left, no row runs");
        assert!(gang.cells().iter().all(|&p| p == NO_PROC));
    }

    #[test]
    fn the_record_stays_as_small_as_the_engines_was() {
        assert_eq!(std::mem::size_of::<GangQuantum>(), 40);
    }

    #[test]
    fn rebuilding_replaces_every_cell() {
        let mut gang = GangQuantum::new(2, 2, true);
        assert!(!gang.place(&[0], &[0, 1], 10, false), "cells following the plan are aligned by the engine");
        gang.clear_cells();
        gang.fill_job(&[1], &[1], 30);
        assert_eq!(gang.cells(), &[NO_PROC, NO_PROC, NO_PROC, 30]);
    }
}
