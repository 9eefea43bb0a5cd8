//! The engine's side of fast mode: checkpoints, windows, jumps (see the
//! parent module). Fast mode's state lives in the parent; this file extends
//! the engine with what acts on it.

use super::kinds::{JobKind, KindMeasure};
use super::{difference, scaled, FastState, Halves, JobRate, Window, WindowMeasure, MAX_WINDOW_GROWTH};
use crate::engine::parts::Parts;
use crate::engine::{Engine, Event, NO_ROW};
use crate::metrics::Breakdown;
use cosched_core::SimTime;

/// What one window saw of one running job.
struct Seen {
    iterations: u64,
    /// Of them, in the window's first half (where it has halves).
    first_half: Option<u64>,
    /// The job's time in the window.
    job_time_ns: u64,
}

impl<P: Parts> Engine<'_, P> {
    /// Run clock of engine instant `t`.
    pub(in crate::engine) fn run_clock(&self, t: SimTime) -> SimTime {
        match &self.fast {
            Some(fast) => t + fast.offset_ns,
            None => t,
        }
    }

    /// Job `j`, on `cpus` in matrix `rows`, started (`started`) or finished at
    /// `now`: what the windows saw of it and of everything linked to its CPUs
    /// by shared CPUs is void (`coupled`; under gang schemes, of everything,
    /// when the number of rows changed; measured per row, only of it and its
    /// cells).
    pub(in crate::engine) fn fast_note_change(
        &mut self,
        j: u32,
        cpus: &[u32],
        rows_of_job: &[u32],
        started: bool,
        now: SimTime,
    ) {
        let rows = if Self::RUNS_ROWS { self.coordinator.coscheduler().slot_count() } else { 0 };
        // When the running row empties, its quantum plays out idle, and the
        // next row starts after a gang switch.
        let (quantum_ns, switch_ns) = (self.cfg.costs.gang_quantum_ns, self.cfg.costs.gang_switch_ns);
        let spec = &self.jobs[j as usize].spec;
        let kind = JobKind::of(spec.tasks, &spec.program);
        let Some(fast) = &mut self.fast else { return };
        let row = if fast.rows.is_some() { rows_of_job[0] } else { NO_ROW };
        if started {
            fast.running.push(JobRate { job: j, row, iterations: 0, measured_ns: 0, kind_sample_due: false });
        } else {
            fast.running.retain(|r| r.job != j);
        }
        fast.changed_at = now;
        fast.window = None;
        fast.tried_before_arrival = None;
        fast.remeasure_at = None;
        if let Some(measures) = &mut fast.rows {
            debug_assert_eq!(rows_of_job.len(), 1, "measured per row, a job runs in one row");
            measures.forget_cells(row, cpus);
            fast.gang_rows = rows;
            let Some((kinds, kind)) = fast.kinds.as_mut().zip(kind.filter(|_| started)) else { return };
            let rate = fast.running.last_mut().expect("the job just started");
            match kinds.on_start(kind) {
                // Measured as its kind was: it needs no window of its own (see `kinds.rs`).
                Some(taken) => {
                    (rate.iterations, rate.measured_ns) = (taken.iterations, taken.measured_ns);
                    measures.set_cells(row, cpus, taken.cell);
                }
                None => rate.kind_sample_due = true,
            }
            return;
        }
        if rows != fast.gang_rows {
            // A row that emptied may be the one running: it idles to the end of
            // its quantum (a window opened 50 ms after 2 rows became 1 saw a
            // third of the jobs' rate, and fast GS runs came out 8-18 % slow).
            // No window opens before the next row has taken over.
            fast.rows_settle_at = fast.rows_settle_at.max(now.next_multiple_after(quantum_ns) + switch_ns);
            fast.gang_rows = rows;
            fast.forget_all();
            return;
        }
        let (coupled_cpus, coupled_jobs) = self.coupled_with(cpus);
        self.fast_mut().forget(&coupled_cpus, &coupled_jobs);
    }

    /// The CPUs and jobs linked to `cpus` through jobs that share a CPU (see [`coupled`](super::coupled)).
    fn coupled_with(&self, cpus: &[u32]) -> (Vec<u32>, Vec<u32>) {
        let jobs_on = |c: u32| self.cpus[c as usize].residents.iter().map(|&p| self.procs[p as usize].job).collect();
        let cpus_of = |j: u32| {
            let job = &self.jobs[j as usize];
            let first = job.first_proc as usize;
            self.procs[first..first + job.spec.tasks as usize].iter().map(|p| p.cpu).collect()
        };
        super::coupled(self.cfg.cpus_per_node, self.cpus.len(), cpus, jobs_on, cpus_of)
    }

    /// The run stops at engine instant `end`, a horizon between checkpoints: count the exact stretch up to it.
    /// A window that ended by then is whole, though no event came before the horizon to close it.
    pub(in crate::engine) fn fast_note_end(&mut self, end: SimTime) {
        let Some(fast) = &mut self.fast else { return };
        if !fast.running.is_empty() && end > fast.last_checkpoint {
            fast.report.exact_busy_ns += end - fast.last_checkpoint;
        }
        self.close_windows_ended_by(end);
    }

    /// Close every window that ended by `now`: a window too short for some job opens again where it closed
    /// (`--fast-min-iterations`), and may end before `now` too. Each is read at its middle first.
    fn close_windows_ended_by(&mut self, now: SimTime) {
        while let Some(until) = self.fast().window.as_ref().map(|w| w.until).filter(|&until| until <= now) {
            self.note_window_middle_by(until);
            self.close_window(until);
        }
        self.note_window_middle_by(now);
    }

    /// Read each running job's progress at the open window's middle, once the run has reached it. Nothing happens
    /// between the last event and `now`, so the state at the middle is known; charging the CPUs up to an instant
    /// changes nothing but when they are charged.
    fn note_window_middle_by(&mut self, now: SimTime) {
        let Some(Window { halves: Halves::Due(middle), .. }) = self.fast().window else { return };
        if middle > now {
            return;
        }
        self.account_all(middle);
        let progress = self.running_progress();
        if let Some(window) = &mut self.fast_mut().window {
            window.halves = Halves::Read(progress);
        }
    }

    /// Fast mode's work before the engine handles the events at `now`: open or
    /// close a measurement window, or jump. True when it jumped (an arrival was
    /// booked earlier, so the next instant must be looked up again).
    pub(in crate::engine) fn fast_checkpoint(&mut self, now: SimTime) -> bool {
        let Some(fast) = &mut self.fast else { return false };
        if !fast.running.is_empty() {
            fast.report.exact_busy_ns += now - fast.last_checkpoint;
        }
        fast.last_checkpoint = now;
        match &fast.window {
            Some(_) => {
                self.close_windows_ended_by(now);
                false
            }
            None if fast.remeasure_at.is_some_and(|at| now >= at) => {
                // A jump was tried and the change it expected never came: the
                // rates that bounded it are stale (see `try_jump`).
                fast.remeasure_at = None;
                fast.changed_at = now;
                fast.tried_before_arrival = None;
                fast.forget_all();
                false
            }
            None if fast.running.iter().all(|r| r.measured_ns > 0) => self.try_jump(now),
            None => {
                let settings = fast.settings;
                // Measured per row, a window holds whole quanta.
                let on_boundary = fast.rows.as_ref().is_none_or(|rows| rows.is_quantum_boundary(now));
                if on_boundary && now >= (fast.changed_at + settings.warmup_ns).max(fast.rows_settle_at) {
                    self.open_window(now, settings.window_ns);
                }
                false
            }
        }
    }

    pub(super) fn open_window(&mut self, now: SimTime, wanted_ns: u64) {
        self.account_all(now);
        let progress = self.running_progress();
        let cpu_time = self.cpus.iter().map(|c| c.time).collect();
        let (until, rows) = if self.fast().rows.is_some() {
            (SimTime::MAX, Some(self.row_window(now, wanted_ns)))
        } else {
            (now + self.window_length(wanted_ns), None)
        };
        let halves = match Self::RUNS_ROWS {
            true => Halves::NotCompared,
            false => Halves::Due(SimTime(now.ns() + (until - now) / 2)),
        };
        let window = Window { from: now, until, progress, halves, cpu_time, rows };
        self.fast_mut().window = Some(window);
    }

    /// Under gang schemes a window holds whole cycles of the occupied rows.
    pub(super) fn window_length(&self, wanted_ns: u64) -> u64 {
        if !Self::RUNS_ROWS {
            return wanted_ns;
        }
        let cycle_ns = self.gang_cycle_ns();
        wanted_ns.div_ceil(cycle_ns) * cycle_ns
    }

    /// One turn of every occupied row of the matrix, a quantum each.
    pub(super) fn gang_cycle_ns(&self) -> u64 {
        self.coordinator.coscheduler().slot_count().max(1) as u64 * self.cfg.costs.gang_quantum_ns
    }

    /// The window's time is up at `until`: add what it saw to every job's and
    /// CPU's measure; open another while some job has done too few iterations.
    pub(super) fn close_window(&mut self, until: SimTime) {
        // Nothing happens between the last event and `now`: the state at `until` is known.
        self.account_all(until);
        let progress = self.running_progress();
        let fast = self.fast.as_mut().expect("fast mode");
        let window = fast.window.take().expect("an open window");
        let length_ns = until - window.from;
        // What each running job did in this window, where windows are recorded.
        let mut seen = Vec::with_capacity(if fast.window_log.is_some() { fast.running.len() } else { 0 });
        let at_middle = match &window.halves {
            Halves::Read(progress) => Some(progress.as_slice()),
            Halves::NotCompared => None,
            Halves::Due(_) => unreachable!("a window is read at its middle before it closes"),
        };
        // Jobs in their first window, where kinds are kept: (index in `running`, iterations, own quanta's length).
        let mut first_windows = Vec::new();
        for (i, (rate, (after, before))) in
            fast.running.iter_mut().zip(progress.iter().zip(&window.progress)).enumerate()
        {
            let measured_ns = match &window.rows {
                Some(rows) => rows.own_quanta_ns(rate.row),
                None => length_ns,
            };
            debug_assert!(measured_ns > 0 || after == before, "a job progresses only in its own quanta");
            if rate.kind_sample_due && measured_ns > 0 {
                rate.kind_sample_due = false;
                first_windows.push((i, after - before, measured_ns));
            }
            rate.iterations += after - before;
            rate.measured_ns += measured_ns;
            let middle = at_middle.map(|progress| progress[i]);
            if let Some(middle) = middle {
                let processes = self.jobs[rate.job as usize].spec.tasks as u64;
                fast.report.judge_halves(middle - before, after - middle, processes);
            }
            if fast.window_log.is_some() {
                let first_half = middle.map(|middle| middle - before);
                seen.push(Seen { iterations: after - before, first_half, job_time_ns: measured_ns });
            }
        }
        if window.rows.is_none() {
            for ((total, cpu), before) in fast.cpu_time.iter_mut().zip(&self.cpus).zip(&window.cpu_time) {
                total.add(&difference(&cpu.time, before));
            }
        }
        fast.report.windows += 1;
        fast.report.window_ns += length_ns;
        if fast.window_log.is_some() {
            self.log_window(until, &seen);
        }
        for (index, iterations, measured_ns) in first_windows {
            self.sample_kind(index, iterations, measured_ns);
        }
        let too_few = self.fast().running.iter().any(|r| self.wants_longer_window(r));
        if too_few {
            self.open_window(until, self.fast().settings.window_ns);
        }
    }

    /// Record what a window closing at engine instant `until` saw of each running job, in the order of `running`.
    fn log_window(&mut self, until: SimTime, seen: &[Seen]) {
        if let Some(log) = self.fast_mut().window_log.as_mut().filter(|log| log.is_full()) {
            log.dropped += seen.len() as u64;
            return;
        }
        let closed_ns = self.run_clock(until).ns();
        let measures: Vec<WindowMeasure> = (self.fast().running.iter().zip(seen))
            .map(|(rate, seen)| {
                let spec = &self.jobs[rate.job as usize].spec;
                WindowMeasure {
                    closed_ns,
                    skipped_ns: self.fast().offset_ns,
                    job_number: spec.job_number,
                    tasks: spec.tasks,
                    row: (rate.row != NO_ROW).then_some(rate.row),
                    job_time_ns: seen.job_time_ns,
                    iterations: seen.iterations,
                    first_half_iterations: seen.first_half,
                    measured_ns: rate.measured_ns,
                    measured_iterations: rate.iterations,
                    rate_per_ns: self.rate_per_ns(rate),
                }
            })
            .collect();
        if let Some(log) = &mut self.fast_mut().window_log {
            log.extend(measures.into_iter());
        }
    }

    /// The running job at `index` had its first window, of `iterations` over its own quanta of `measured_ns`: what
    /// it and its CPUs' cells did there goes to its kind (see `kinds.rs`).
    fn sample_kind(&mut self, index: usize, iterations: u64, measured_ns: u64) {
        let rate = self.fast().running[index];
        let job = &self.jobs[rate.job as usize];
        let Some(kind) = JobKind::of(job.spec.tasks, &job.spec.program) else { return };
        let first = job.first_proc as usize;
        let procs = &self.procs[first..first + job.spec.tasks as usize];
        let cpus: Vec<u32> = procs.iter().map(|p| p.cpu).collect();
        let fast = self.fast.as_mut().expect("fast mode");
        // The job's cells were forgotten at its start: they hold its quanta in this window and in any a change cut
        // short since, whole quanta of this job on these CPUs either way.
        let cell = fast.rows.as_ref().expect("kinds are kept per row").sum_of_cells(rate.row, &cpus);
        let sample = KindMeasure { iterations, measured_ns, cell, ..KindMeasure::default() };
        fast.kinds.as_mut().expect("kinds are kept").add_sample(kind, &sample);
    }

    /// Whether a measured job did too few iterations yet (see [`FastSettings::min_iterations`]).
    pub(super) fn wants_longer_window(&self, rate: &JobRate) -> bool {
        let settings = self.fast().settings;
        let tasks = self.jobs[rate.job as usize].spec.tasks as u64;
        rate.iterations < settings.min_iterations * tasks
            && rate.measured_ns < settings.window_ns.saturating_mul(MAX_WINDOW_GROWTH)
    }

    /// Jump as far as the rates allow, once per arrival and per change.
    pub(super) fn try_jump(&mut self, now: SimTime) -> bool {
        let next_arrival = self.fast().next_arrival;
        if self.fast().tried_before_arrival == Some(next_arrival) {
            return false;
        }
        let jump = self.jump_length(now);
        let patience_ns = self.remeasure_patience_ns();
        let fast = self.fast_mut();
        fast.tried_before_arrival = Some(next_arrival);
        // A jump ends short of a job's predicted end (or is too short to
        // make because a job measured as progressing is that close to it), so
        // some change is due within the guard. If none comes, a rate was
        // stale: typically a job whose processes all finished but one, which
        // is starved on its CPU (two processes that take turns there, each
        // woken or preempted to the head of the top level, can keep it off it
        // for as long as both run). Its rate then bounds every later jump to
        // nothing, and the run crawls on exactly, for hours of a site's time,
        // until some other job ends. So if nothing changes for a warm-up and a
        // window, every job is measured again: a job stalled by then is
        // measured at no progress and no longer bounds the jump.
        let settings = fast.settings;
        fast.remeasure_at = Some(now + patience_ns);
        if jump < settings.min_jump_ns {
            return false;
        }
        self.jump(now, jump);
        true
    }

    /// How long a change a jump expects may take before every job is measured
    /// again: a warm-up and a window; measured per row, a cycle of the rows
    /// more, as the job due to end may wait that long for its row's turn.
    pub(super) fn remeasure_patience_ns(&self) -> u64 {
        let settings = self.fast().settings;
        match self.fast().rows {
            Some(_) => settings.warmup_ns + self.window_length(settings.window_ns) + self.gang_cycle_ns(),
            None => settings.warmup_ns + settings.window_ns,
        }
    }

    /// Iterations per nanosecond of a job's processes, on average.
    pub(super) fn rate_per_ns(&self, rate: &JobRate) -> f64 {
        let tasks = self.jobs[rate.job as usize].spec.tasks as f64;
        // Measured per row, a job runs one quantum of each cycle of the rows.
        let cycle_share = match self.fast().rows {
            Some(_) => self.fast().gang_rows.max(1) as f64,
            None => 1.0,
        };
        rate.iterations as f64 / tasks / (rate.measured_ns.max(1) as f64 * cycle_share)
    }

    /// How far the run clock may jump from engine instant `now`: short of the
    /// next arrival, the horizon, and (by the guard) every job's predicted end.
    /// 0 when nothing bounds it (every running job measured at no progress,
    /// no arrival left): the engine then runs on exactly.
    pub(super) fn jump_length(&self, now: SimTime) -> u64 {
        let fast = self.fast();
        let run_now = self.run_clock(now);
        let mut limit = u64::MAX;
        if let Some(job) = self.jobs.get(fast.next_arrival) {
            limit = limit.min(job.spec.arrival.ns().saturating_sub(run_now.ns()));
        }
        if let Some(horizon) = self.cfg.horizon_ns {
            limit = limit.min(horizon.saturating_sub(run_now.ns()));
        }
        for rate in &fast.running {
            let per_ns = self.rate_per_ns(rate);
            if per_ns <= 0.0 {
                continue;
            }
            let left = self.iterations_left(rate.job) as f64 - 1.0 - (per_ns * fast.settings.guard_ns as f64).ceil();
            limit = limit.min((left.max(0.0) / per_ns).floor() as u64);
        }
        if limit == u64::MAX {
            0
        } else {
            limit
        }
    }

    /// Iterations left to the job's most advanced process.
    pub(super) fn iterations_left(&self, j: u32) -> u64 {
        let job = &self.jobs[j as usize];
        let first = job.first_proc as usize;
        let most_done = self.procs[first..first + job.spec.tasks as usize].iter().map(|p| p.iterations_done).max();
        (job.spec.program.iterations - most_done.unwrap_or(0)) as u64
    }

    /// Skip `jump_ns` of the run clock at engine instant `now`.
    pub(super) fn jump(&mut self, now: SimTime, jump_ns: u64) {
        self.account_all(now);
        let running = self.fast().running.clone();
        for rate in &running {
            let per_ns = self.rate_per_ns(rate);
            let credit =
                ((per_ns * jump_ns as f64).round() as u64).min(self.iterations_left(rate.job).saturating_sub(1));
            let job = &self.jobs[rate.job as usize];
            let first = job.first_proc as usize;
            let procs = &mut self.procs[first..first + job.spec.tasks as usize];
            // CPU time goes with the iterations, at the job's CPU time per iteration so far (what its nodes report
            // to the controller under the schemes that run it).
            let (cpu_ns, iterations) = procs
                .iter()
                .fold((0u128, 0u128), |(c, i), p| (c + u128::from(p.cpu_ns), i + u128::from(p.iterations_done)));
            let cpu_credit_ns = (cpu_ns * u128::from(credit)).checked_div(iterations).unwrap_or(0) as u64;
            for proc in procs {
                proc.iterations_done += credit as u32;
                proc.cpu_ns += cpu_credit_ns;
            }
        }
        let skipped: Vec<Breakdown> = match self.fast().rows {
            Some(_) => self.skipped_cpu_time_by_rows(jump_ns),
            None => self.skipped_cpu_time(jump_ns),
        };
        for (cpu, skipped) in self.cpus.iter_mut().zip(&skipped) {
            cpu.time.add(skipped);
        }
        let fast = self.fast.as_mut().expect("fast mode");
        fast.offset_ns += jump_ns;
        fast.report.jumps += 1;
        fast.report.skipped_ns += jump_ns;
        // The arrival booked before the jump is now stale (see `handle`); book it at its new engine instant.
        let (next, offset_ns) = (fast.next_arrival, fast.offset_ns);
        if let Some(job) = self.jobs.get(next) {
            let at = SimTime(job.spec.arrival.ns() - offset_ns).max(now);
            self.queue.schedule(at, Event::Arrival(next as u32));
        }
    }

    /// Each CPU's time over `jump_ns` at the shares its windows measured.
    pub(super) fn skipped_cpu_time(&self, jump_ns: u64) -> Vec<Breakdown> {
        let fast = self.fast();
        self.cpus
            .iter()
            .zip(&fast.cpu_time)
            .map(|(cpu, measured)| {
                if measured.total_ns() == 0 {
                    // Never measured since it last changed: nothing runs on it (its jobs would have been measured).
                    debug_assert!(cpu.residents.is_empty(), "a CPU with processes has a measure");
                    Breakdown { idle_ns: jump_ns, ..Breakdown::default() }
                } else {
                    scaled(measured, measured.total_ns(), jump_ns)
                }
            })
            .collect()
    }

    /// Iterations done by each running job's processes together.
    pub(super) fn running_progress(&self) -> Vec<u64> {
        self.fast()
            .running
            .iter()
            .map(|r| {
                let job = &self.jobs[r.job as usize];
                let first = job.first_proc as usize;
                self.procs[first..first + job.spec.tasks as usize].iter().map(|p| p.iterations_done as u64).sum()
            })
            .collect()
    }

    pub(super) fn account_all(&mut self, now: SimTime) {
        for c in 0..self.cpus.len() as u32 {
            self.account(c, now);
        }
    }

    pub(super) fn fast(&self) -> &FastState {
        self.fast.as_ref().expect("fast mode")
    }

    pub(super) fn fast_mut(&mut self) -> &mut FastState {
        self.fast.as_mut().expect("fast mode")
    }
}
