//! Writes a generated policy set into a directory: `gen_policies DIR TOTAL [multus]`. The
//! set holds the 4 policies matching the realistic pod, or with `multus` only the Multus one
//! (the hand-written webhook's work), and generated policies that do not match it. Used by
//! `bench/load.sh`.
#![forbid(unsafe_code)]

#[path = "../benches/support/policies.rs"]
mod policies;

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let dir = std::path::PathBuf::from(args.next().unwrap_or_else(|| "policies-gen".into()));
    let total: usize = args.next().as_deref().unwrap_or("100").parse()?;
    let matching = policies::Matching::from_argument(args.next().as_deref())
        .map_err(|error| anyhow::anyhow!("the third argument: {error}"))?;
    std::fs::create_dir_all(&dir)?;
    policies::write_set_matching(&dir, total, matching)?;
    println!("{total} policies in {}", dir.display());
    Ok(())
}
