"""Types of the native module (crates/cosched-python): each function takes a command's flags as the CLI writes them."""

__version__: str

class CoschedError(ValueError):
    """A setting, input file or request cosched refuses; the message is the command line's."""

class SimTexts:
    summary_csv: str
    jobs_csv: str
    summary_kinds: list[tuple[str, str]]
    jobs_kinds: list[tuple[str, str]]
    summary_json: str
    batsim_jobs_csv: list[tuple[str, str]]
    jitter_csv: str
    jitter_kinds: list[tuple[str, str]]

class StudyTexts:
    runs_csv: str
    points_csv: str
    runs_kinds: list[tuple[str, str]]
    points_kinds: list[tuple[str, str]]
    table_md: str

class Trace:
    header: list[str]
    rows: list[list[float]]
    skipped_bad_lines: list[int]
    unusable: list[tuple[int, str]]
    description: str

class GymView:
    now_s: float
    waiting: list[tuple[int, int, float, float, bool, list[bool]]]
    waiting_count: int
    running_jobs: int
    matrix: list[list[int]]
    processes_per_cpu: list[int]
    waited_s_total: float

class GymRun:
    def __init__(self, flags: list[str], window: int) -> None: ...
    def next(self) -> GymView | SimTexts: ...
    def choose(self, job: int | None, row: int | None = None) -> GymView | SimTexts: ...
    def close(self) -> None: ...

def gym_shape(flags: list[str]) -> tuple[int, list[int]]: ...
def simulate(flags: list[str]) -> SimTexts: ...
def flag_table(command: str) -> list[tuple[str, str, str | None, bool]]: ...
def study(experiment: str, flags: list[str], progress: bool = False, out: str | None = None) -> StudyTexts: ...
def study_design_size(experiment: str, flags: list[str]) -> int: ...
def study_shard(experiment: str, flags: list[str], index: int, count: int) -> str: ...
def study_merge(documents: list[str], out: str | None = None) -> StudyTexts: ...
def workload_generate(flags: list[str]) -> Trace: ...
def workload_read(path: str, skip_bad_lines: bool) -> Trace: ...
def workload_write(path: str, header: list[str], rows: list[list[float]]) -> None: ...
def workload_summary(header: list[str], rows: list[list[float]], procs: int | None = None) -> str: ...
def workload_fit(header: list[str], rows: list[list[float]], procs: int | None = None) -> tuple[str, str]: ...
