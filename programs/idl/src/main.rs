//! `ledger-idl [--check]`: builds the IDL of programs/payment_ledger from its source with the
//! same machinery as `anchor idl build` (the program's `idl-build` feature prints its pieces from
//! generated tests, which are assembled here), and writes it to
//! programs/payment_ledger/idl/payment_ledger.json. With `--check` it writes nothing and fails
//! when the checked-in IDL differs from the source: the TypeScript stack reads the checked-in
//! file, so it must never drift.

use std::{fs, path::PathBuf, process::ExitCode};

fn main() -> anyhow::Result<ExitCode> {
    let check = std::env::args().any(|arg| arg == "--check");
    // anchor-lang-idl 0.1.4 turns a set RUSTUP_TOOLCHAIN into the literal argument
    // `+{toolchain}`; the toolchain cargo already runs with is the right one anyway.
    std::env::remove_var("RUSTUP_TOOLCHAIN");
    // The checkout `cargo run` runs in (it sets CARGO_MANIFEST_DIR for the process), not the one
    // this binary was compiled in: checkouts that share a target dir reuse one build of this tool,
    // and the compile-time path would make every one of them check the first checkout's IDL.
    let manifest_dir = std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from);
    let root = manifest_dir.join("../payment_ledger");
    let program = root.canonicalize()?;
    let idl = anchor_lang_idl::build::IdlBuilder::new()
        .program_path(program.clone())
        .resolution(true)
        .build()?;
    let json = serde_json::to_string_pretty(&idl)? + "\n";
    let target = program.join("idl/payment_ledger.json");

    if check {
        let current = fs::read_to_string(&target).unwrap_or_default();
        if current != json {
            eprintln!(
                "{} is out of date: run `npm run build:idl`",
                target.display()
            );
            return Ok(ExitCode::FAILURE);
        }
        println!("IDL up to date: {}", target.display());
        return Ok(ExitCode::SUCCESS);
    }
    fs::create_dir_all(target.parent().expect("idl dir"))?;
    fs::write(&target, json)?;
    println!("wrote {}", target.display());
    Ok(ExitCode::SUCCESS)
}
