//! The optimistic model of `j` jobs sharing CPUs (spec `bench.md`):
//!
//! ```text
//! t_j = max(t_1, j · (p / c) · t_1(α_c + α_CPU, β_CPU))
//! ```
//!
//! While one job waits on a message another computes, so only the CPU part
//! of messaging, plus a context switch per message, is paid. `p / c` (ranks
//! per CPU) is 1 in the published setting; it keeps the model honest for
//! oversubscribed jobs (our generalisation).
//!
//! A job is described by its compute time and the messages and doubles each
//! rank sends: `t_1(α, β) = compute + messages · α + doubles · β`.

use serde::Serialize;

/// Message and switch costs, from the microbenchmarks or given by hand.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CostParams {
    /// Context switch per message, `α_c`.
    pub alpha_c_s: f64,
    /// One-way latency `α` and time per double `β` of the transport.
    pub alpha_s: f64,
    pub beta_s_per_double: f64,
    /// CPU time a message consumes: `α_CPU + β_CPU · n`.
    pub alpha_cpu_s: f64,
    pub beta_cpu_s_per_double: f64,
}

/// What one rank of a job does, for the model.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct JobShape {
    pub compute_s: f64,
    pub messages: f64,
    pub doubles: f64,
    /// Processes of one job, and CPUs they share.
    pub ranks: u32,
    pub cpus: u32,
}

impl JobShape {
    /// `t_1(α, β)`.
    pub fn time_s(&self, alpha_s: f64, beta_s_per_double: f64) -> f64 {
        self.compute_s + self.messages * alpha_s + self.doubles * beta_s_per_double
    }

    /// The matrix multiply `C ← A·A + C` on a `P×Q` grid with panels of `k`:
    /// `(2N³/PQ)·γ₃` of compute, `(N²/PQ)·((P−1) + (Q−1))` doubles received
    /// (the spec's formula with `β_v = β_h`: one transport within a node) and
    /// one message per panel from each direction that is not the rank's own,
    /// `⌈N/k⌉·((P−1)/P + (Q−1)/Q)`.
    pub fn matrix_multiply(n: u64, p_rows: u32, q_cols: u32, k: u64, gamma3_s: f64, cpus: u32) -> JobShape {
        let (n_f, p, q) = (n as f64, p_rows as f64, q_cols as f64);
        let panels = n.div_ceil(k.max(1)) as f64;
        JobShape {
            compute_s: 2.0 * n_f.powi(3) / (p * q) * gamma3_s,
            messages: panels * ((p - 1.0) / p + (q - 1.0) / q),
            doubles: n_f * n_f / (p * q) * ((p - 1.0) + (q - 1.0)),
            ranks: p_rows * q_cols,
            cpus,
        }
    }

    fn ranks_per_cpu(&self) -> f64 {
        self.ranks as f64 / self.cpus.max(1) as f64
    }
}

/// `t_1` from the model: one job alone, paying the whole message time.
pub fn single_job_s(shape: &JobShape, costs: &CostParams) -> f64 {
    shape.time_s(costs.alpha_s, costs.beta_s_per_double) * shape.ranks_per_cpu().max(1.0)
}

/// CPU-busy time one job puts on each of its CPUs when its waits overlap others' work.
pub fn busy_per_cpu_s(shape: &JobShape, costs: &CostParams) -> f64 {
    shape.time_s(costs.alpha_c_s + costs.alpha_cpu_s, costs.beta_cpu_s_per_double) * shape.ranks_per_cpu()
}

/// `t_j` for `j` jobs, given the single-job time `t1_s` (measured or modelled).
pub fn shared_time_s(jobs: u32, t1_s: f64, shape: &JobShape, costs: &CostParams) -> f64 {
    t1_s.max(jobs as f64 * busy_per_cpu_s(shape, costs))
}

/// What was measured of one `j`, to compare with the model.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Measured {
    pub jobs: u32,
    pub t1_s: f64,
    pub tj_s: f64,
    /// CPU seconds of one job alone, and of all `j` jobs together.
    pub cpu1_s: f64,
    pub cpuj_s: f64,
    /// CPUs the jobs shared.
    pub cpus: u32,
}

/// The model's slowdown against the measured one, the error split by cause:
/// `measured − model = cost + a2 + a1`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ErrorSplit {
    pub jobs: u32,
    pub model: f64,
    pub measured: f64,
    /// The slowdown if each job's CPU demand were what one job alone used
    /// (its measured %CPU): A1 and A2 both hold.
    pub from_cpu_alone: f64,
    /// The slowdown if the CPUs were never idle while work remained: the
    /// CPU time the `j` jobs actually used together (A1 holds, A2 need not).
    pub from_cpu_shared: f64,
    /// `from_cpu_alone − model`: the model's estimate of a job's CPU demand
    /// (microbenchmark costs and message counts) against its measured %CPU.
    pub cost_error: f64,
    /// `from_cpu_shared − from_cpu_alone`: CPU time added by sharing (cache
    /// pollution, switches): assumption A2.
    pub a2_error: f64,
    /// `measured − from_cpu_shared`: CPUs idle while jobs waited with no other
    /// ready process: assumption A1.
    pub a1_error: f64,
}

/// Split the error of the model's slowdown `model` against a measurement.
pub fn split_error(model: f64, m: &Measured) -> ErrorSplit {
    let capacity_s = m.cpus.max(1) as f64 * m.t1_s;
    let measured = m.tj_s / m.t1_s;
    let from_cpu_alone = (m.jobs as f64 * m.cpu1_s / capacity_s).max(1.0);
    let from_cpu_shared = (m.cpuj_s / capacity_s).max(1.0);
    ErrorSplit {
        jobs: m.jobs,
        model,
        measured,
        from_cpu_alone,
        from_cpu_shared,
        cost_error: from_cpu_alone - model,
        a2_error: from_cpu_shared - from_cpu_alone,
        a1_error: measured - from_cpu_shared,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn costs() -> CostParams {
        CostParams {
            alpha_c_s: 5e-6,
            alpha_s: 50e-6,
            beta_s_per_double: 10e-9,
            alpha_cpu_s: 15e-6,
            beta_cpu_s_per_double: 2e-9,
        }
    }

    #[test]
    fn matrix_multiply_shape_by_hand() {
        // N = 1024 on 2x1, k = 128, γ3 = 1 ns: compute 2·1024³/2 ns = 1.073741824 s;
        // doubles 1024²/2 · (1 + 0) = 524288; messages 8 · (1/2 + 0) = 4.
        let s = JobShape::matrix_multiply(1024, 2, 1, 128, 1e-9, 2);
        assert!((s.compute_s - 1.073741824).abs() < 1e-12);
        assert_eq!((s.doubles, s.messages, s.ranks), (524288.0, 4.0, 2));
        // t_1 = 1.073741824 + 4·50 µs + 524288·10 ns = 1.079184704 s.
        assert!((single_job_s(&s, &costs()) - 1.079184704).abs() < 1e-12);
        // Busy: 1.073741824 + 4·20 µs + 524288·2 ns = 1.074870400 s.
        assert!((busy_per_cpu_s(&s, &costs()) - 1.0748704).abs() < 1e-12);
    }

    #[test]
    fn a_busy_job_slows_by_j_and_a_waiting_job_by_less() {
        let busy = JobShape { compute_s: 1.0, messages: 0.0, doubles: 0.0, ranks: 2, cpus: 2 };
        assert_eq!(shared_time_s(4, 1.0, &busy, &costs()), 4.0);
        // Half its time waiting on 10 000 messages of 50 µs each, each costing 20 µs of CPU:
        // busy = 0.5 + 10 000 · 20 µs = 0.7 s; t_2 = max(1.0, 1.4) = 1.4; t_1 = max(1, ...) for j = 1.
        let waiting = JobShape { compute_s: 0.5, messages: 10_000.0, doubles: 0.0, ranks: 2, cpus: 2 };
        assert!((shared_time_s(2, 1.0, &waiting, &costs()) - 1.4).abs() < 1e-12);
        assert_eq!(shared_time_s(1, 1.0, &waiting, &costs()), 1.0);
    }

    #[test]
    fn oversubscribed_ranks_count_per_cpu() {
        // 4 ranks on 2 CPUs: each CPU carries two ranks' work.
        let shape = JobShape { compute_s: 1.0, messages: 0.0, doubles: 0.0, ranks: 4, cpus: 2 };
        assert_eq!(single_job_s(&shape, &costs()), 2.0);
        assert_eq!(shared_time_s(2, 2.0, &shape, &costs()), 4.0);
    }

    #[test]
    fn error_parts_add_up_and_mean_what_they_say() {
        // t_1 = 10 s on 2 CPUs using 12 CPU-s alone (60 %); two jobs took 15 s using 26 CPU-s.
        let m = Measured { jobs: 2, t1_s: 10.0, tj_s: 15.0, cpu1_s: 12.0, cpuj_s: 26.0, cpus: 2 };
        let split = split_error(1.1, &m);
        assert_eq!(split.measured, 1.5);
        assert!((split.from_cpu_alone - 1.2).abs() < 1e-12); // 2·12 / 20
        assert!((split.from_cpu_shared - 1.3).abs() < 1e-12); // 26 / 20
        assert!((split.cost_error - 0.1).abs() < 1e-12);
        assert!((split.a2_error - 0.1).abs() < 1e-12);
        assert!((split.a1_error - 0.2).abs() < 1e-12);
        let total = split.cost_error + split.a2_error + split.a1_error;
        assert!((total - (split.measured - split.model)).abs() < 1e-12);
    }

    #[test]
    fn slowdown_below_one_is_not_predicted() {
        let m = Measured { jobs: 1, t1_s: 10.0, tj_s: 10.0, cpu1_s: 4.0, cpuj_s: 4.0, cpus: 2 };
        let split = split_error(1.0, &m);
        assert_eq!((split.from_cpu_alone, split.from_cpu_shared, split.a1_error), (1.0, 1.0, 0.0));
    }
}
