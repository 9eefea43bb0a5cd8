//! Programs whose iterations come in rounds (an LU's panels: exchanges with little compute between them, then a
//! long update): alone they take their compute and messages, no more; shared, they lose less than the same
//! compute spread evenly, since a long update needs no partner.

mod common;

use common::{config, finish_ns, job, simulate, MS, US};
use cosched_sim::app::dedicated_ns;
use cosched_sim::{OsScheduler, Rounds, Scheme, Shrink, SimConfig, SimJob};

/// As mpi_lu on 2 ranks, smaller: 40 rounds (panels) of 62 exchanges, 61 of 20 µs, then an update of 12 ms on
/// average.
fn lu_like(number: u64) -> SimJob {
    let mut j = job(number, 0, 2, 20 * US, 0, 40 * 62);
    j.program.rounds = Rounds { iterations: 62, long_compute_mean_ns: 12 * MS, shrink: Shrink::Quadratic };
    j
}

/// The same compute per task, spread evenly over the exchanges.
fn even(number: u64) -> SimJob {
    let mut j = lu_like(number);
    let compute_ns = j.program.iterations_compute_ns();
    j.program.rounds = Rounds::NONE;
    j.program.compute_ns = compute_ns / j.program.iterations as u64;
    j
}

#[test]
fn alone_a_program_of_rounds_takes_its_dedicated_time() {
    let cfg = config(Scheme::LOCAL, 2, 2);
    let program = lu_like(1).program;
    // 39 updates (the last round's is 0) averaging 12 ms over 40 rounds, 2,440 short computes; each update
    // rounded down to the nanosecond.
    let expected_ns = 40 * 12 * MS + 2_440 * 20 * US;
    assert!((expected_ns - 39..=expected_ns).contains(&program.iterations_compute_ns()));
    let finish = finish_ns(&simulate(&cfg, vec![lu_like(1)]), 1);
    assert_eq!(finish, dedicated_ns(&program, 2, &cfg.network));
    // Alone, only the total compute counts (the even program's is rounded down per exchange).
    let even_finish = finish_ns(&simulate(&cfg, vec![even(1)]), 1);
    assert!(finish.abs_diff(even_finish) < 2_480, "rounds {finish} ns, even {even_finish} ns");
}

/// Four copies on a node of 2 CPUs under the kernel's scheduler, whose turns drift apart between CPUs
/// (housekeeping wakes): a copy's two tasks run at once only part of the time. An even program needs its partner
/// at every exchange; one of rounds does its long updates at its CPU share whatever its partner does.
#[test]
fn shared_under_local_scheduling_rounds_lose_less_than_even_compute() {
    let mut cfg = SimConfig { cpus_per_node: 2, ..config(Scheme::LOCAL, 1, 8) };
    cfg.node_scheduler = OsScheduler::Eevdf;
    cfg.scheduler.housekeeping_wake_interval_ns = 37 * MS;
    // As this 2-CPU machine measured: HZ 250, shared memory in a microsecond, no interface cost.
    cfg.scheduler.tick_ns = 4 * MS;
    cfg.scheduler.raise_period_ns = cfg.scheduler.raise_period_ns.div_ceil(4 * MS) * 4 * MS;
    (cfg.network.shm_base_ns, cfg.network.shm_ns_per_byte, cfg.network.nic_ns_per_message) = (50.0, 0.13, 0);
    let last = |copy: fn(u64) -> SimJob| {
        let result = simulate(&cfg, (1..=4).map(copy).collect());
        (1..=4).map(|j| finish_ns(&result, j)).max().unwrap()
    };
    let (rounds_ns, even_ns) = (last(lu_like), last(even));
    assert!(rounds_ns * 5 < even_ns * 4, "four copies: rounds {rounds_ns} ns, even {even_ns} ns");
}
