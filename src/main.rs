#![forbid(unsafe_code)]

/// mimalloc instead of the system allocator: a review parses, copies and converts a
/// Kubernetes object of a few hundred small maps and strings, and callgrind showed
/// glibc's malloc and free at over a third of a review's instructions. The allocator is
/// the program's choice, not the library's: the benchmarks set the same one, so they
/// measure what `graft serve` runs. It is built without transparent huge pages
/// (`no_thp` in Cargo.toml): with them, each 2 MiB of an arena a thread touched was
/// resident whole: 8–11 MiB of a 1,000-policy server's 40–43 MiB, for no throughput a
/// same-run comparison could see (BENCHMARKS.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    graft::cli::main()
}
