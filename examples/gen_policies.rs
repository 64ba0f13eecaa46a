//! Writes a generated policy set (4 policies matching the realistic pod, the rest not)
//! into a directory: `gen_policies DIR TOTAL`. Used by `bench/load.sh`.

#[path = "../benches/support/policies.rs"]
mod policies;

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let dir = std::path::PathBuf::from(args.next().unwrap_or_else(|| "policies-gen".into()));
    let total: usize = args.next().as_deref().unwrap_or("100").parse()?;
    std::fs::create_dir_all(&dir)?;
    policies::write_set(&dir, total)?;
    println!("{total} policies in {}", dir.display());
    Ok(())
}
