// oneTBB baseline of the pipeline overhead benchmark.
//
//   tbb_pipeline_overhead STAGES TOKENS ITEMS [THREADS]
//
// Runs a oneTBB parallel_pipeline of STAGES (>= 2) serial_in_order filters
// that do no work: the input filter emits ITEMS items and then stops, the
// STAGES-2 middle filters pass each item on unchanged, and the last filter
// increments a counter in the item so that the compiler cannot drop the work.
// An item is a pointer to one of TOKENS preallocated 64-byte buffers (buffer
// seq % TOKENS), and TOKENS is the pipeline's max_number_of_live_tokens.
// THREADS (default: the hardware concurrency) bounds oneTBB's parallelism.
//
// One untimed warm-up run of min(ITEMS, 10000) items precedes one timed run
// of ITEMS items. Prints one JSON line to stdout:
//   {"framework":"oneTBB","stages":S,"tokens":T,"items":N,"threads":P,
//    "seconds":X,"ns_per_item":Y}
// Exit status: 0 on success, 1 if the counters do not add up (or oneTBB
// fails), 2 on bad arguments.

#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/parallel_pipeline.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <thread>
#include <vector>

namespace {

const char *const usage_line = "usage: tbb_pipeline_overhead STAGES TOKENS ITEMS [THREADS]\n"
                               "  STAGES >= 2 filters in all (input, STAGES-2 empty, last)\n"
                               "  TOKENS >= 1 live tokens (preallocated buffers)\n"
                               "  ITEMS >= 1 items in the timed run\n"
                               "  THREADS >= 1 (default: the hardware concurrency)\n";

[[noreturn]] void bad_argument(const char *name, const char *text, const char *why) {
    std::fprintf(stderr, "tbb_pipeline_overhead: bad %s '%s': %s\n%s", name, text, why, usage_line);
    std::exit(2);
}

// Parse a decimal unsigned integer >= min; exit with status 2 otherwise.
std::uint64_t parse_count(const char *name, const char *text, std::uint64_t min) {
    if (text[0] < '0' || text[0] > '9') // rejects "", "-1", "+1", " 1"
        bad_argument(name, text, "not a non-negative decimal integer");
    errno = 0;
    char *end = nullptr;
    unsigned long long value = std::strtoull(text, &end, 10);
    if (*end != '\0')
        bad_argument(name, text, "not a non-negative decimal integer");
    if (errno == ERANGE)
        bad_argument(name, text, "too large");
    if (value < min) {
        char why[64];
        std::snprintf(why, sizeof why, "must be at least %llu", static_cast<unsigned long long>(min));
        bad_argument(name, text, why);
    }
    return value;
}

// One buffer per live token, on its own cache line.
struct alignas(64) Buffer {
    std::uint64_t count;
};
static_assert(sizeof(Buffer) == 64, "a buffer is 64 bytes");

} // namespace

int main(int argc, char **argv) {
    if (argc < 4) {
        static const char *const missing[] = {"STAGES TOKENS ITEMS", "TOKENS ITEMS", "ITEMS"};
        std::fprintf(stderr, "tbb_pipeline_overhead: missing %s\n%s", missing[argc - 1], usage_line);
        return 2;
    }
    if (argc > 5) {
        std::fprintf(stderr, "tbb_pipeline_overhead: too many arguments, from '%s' on\n%s", argv[5], usage_line);
        return 2;
    }
    const std::uint64_t stages = parse_count("STAGES", argv[1], 2);
    const std::uint64_t tokens = parse_count("TOKENS", argv[2], 1);
    const std::uint64_t items = parse_count("ITEMS", argv[3], 1);
    std::uint64_t threads;
    if (argc == 5) {
        threads = parse_count("THREADS", argv[4], 1);
    } else {
        threads = std::thread::hardware_concurrency();
        if (threads == 0)
            threads = 1;
    }
    if (stages > 1000000)
        bad_argument("STAGES", argv[1], "more than 1000000 filters");
    if (tokens > 100000000)
        bad_argument("TOKENS", argv[2], "more than 100000000 buffers");

    try {
        tbb::global_control parallelism(tbb::global_control::max_allowed_parallelism, threads);

        std::vector<Buffer> buffers(tokens, Buffer{0});
        // The input filter is serial, so these need no synchronisation.
        std::uint64_t next = 0, limit = 0;

        // Buffer seq % TOKENS is free again when item seq is emitted: at most
        // TOKENS items are live, and since the last filter is serial_in_order
        // they retire in order, so item seq - TOKENS has already retired.
        auto chain = tbb::make_filter<void, Buffer *>(
            tbb::filter_mode::serial_in_order, [&](tbb::flow_control &fc) -> Buffer * {
                if (next == limit) {
                    fc.stop();
                    return nullptr;
                }
                return &buffers[next++ % tokens];
            });
        for (std::uint64_t i = 0; i < stages - 2; i++)
            chain = chain & tbb::make_filter<Buffer *, Buffer *>(tbb::filter_mode::serial_in_order,
                                                                 [](Buffer *b) { return b; });
        const tbb::filter<void, void> pipeline =
            chain & tbb::make_filter<Buffer *, void>(tbb::filter_mode::serial_in_order,
                                                     [](Buffer *b) { b->count++; });

        // Runs the pipeline over n items with zeroed counters; returns the
        // seconds spent in parallel_pipeline.
        auto run = [&](std::uint64_t n) {
            for (Buffer &b : buffers)
                b.count = 0;
            next = 0;
            limit = n;
            const auto start = std::chrono::steady_clock::now();
            tbb::parallel_pipeline(tokens, pipeline);
            const auto stop = std::chrono::steady_clock::now();
            return std::chrono::duration<double>(stop - start).count();
        };
        // Whether the counters add up to n; says so on stderr if not.
        auto check = [&](const char *what, std::uint64_t n) {
            std::uint64_t sum = 0;
            for (const Buffer &b : buffers)
                sum += b.count;
            if (sum != n) {
                std::fprintf(stderr, "tbb_pipeline_overhead: %s counted %llu items, expected %llu\n", what,
                             static_cast<unsigned long long>(sum), static_cast<unsigned long long>(n));
                return false;
            }
            return true;
        };

        const std::uint64_t warmup = items < 10000 ? items : 10000;
        run(warmup);
        if (!check("the warm-up run", warmup))
            return 1;
        const double seconds = run(items);
        if (!check("the timed run", items))
            return 1;

        std::printf("{\"framework\":\"oneTBB\",\"stages\":%llu,\"tokens\":%llu,\"items\":%llu,"
                    "\"threads\":%llu,\"seconds\":%.9f,\"ns_per_item\":%.3f}\n",
                    static_cast<unsigned long long>(stages), static_cast<unsigned long long>(tokens),
                    static_cast<unsigned long long>(items), static_cast<unsigned long long>(threads),
                    seconds, seconds * 1e9 / static_cast<double>(items));
    } catch (const std::exception &e) {
        std::fprintf(stderr, "tbb_pipeline_overhead: %s\n", e.what());
        return 1;
    }
    return 0;
}
