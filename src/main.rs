#![forbid(unsafe_code)]

/// mimalloc instead of the system allocator: a review parses, copies and converts a
/// Kubernetes object of a few hundred small maps and strings, and callgrind showed
/// glibc's malloc and free at over a third of a review's instructions. The allocator is
/// the program's choice, not the library's: the benchmarks set the same one, so they
/// measure what `graft serve` runs.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    graft::cli::main()
}
