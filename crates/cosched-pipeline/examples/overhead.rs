// Quick look at the framework's per-buffer cost: overhead STAGES THREADS(0=per stage) SPINS YIELDS
use cosched_pipeline::overhead::{time_run, Mapping};
use cosched_pipeline::WaitPolicy;
fn main() {
    let a: Vec<usize> = std::env::args().skip(1).map(|s| s.parse().unwrap()).collect();
    let mapping = if a[1] == 0 { Mapping::ThreadPerStage } else { Mapping::Threads(a[1]) };
    let items = 1_000_000;
    time_run(a[0], 8, 10_000, mapping, WaitPolicy { spins: a[2] as u32, yields: a[3] as u32 }).unwrap();
    let t = time_run(a[0], 8, items, mapping, WaitPolicy { spins: a[2] as u32, yields: a[3] as u32 }).unwrap();
    println!("{:.1} ns/item", t.as_secs_f64() * 1e9 / items as f64);
}
