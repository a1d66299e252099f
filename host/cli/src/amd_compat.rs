//! AMD's rocm-kpack flags (`python -m rocm_kpack.tools.*`, spec §12) that
//! TheRock's scripts pass and that mean nothing to kpack: accepted, hidden
//! from `--help`, and said out loud on stderr where AMD's tool would have
//! used them, so a script moved over to kpack runs unchanged.

use std::path::PathBuf;

/// The "Compatibility" paragraph of `kpack split --help`.
pub const SPLIT_HELP: &str = "\
Compatibility with AMD's rocm-kpack flags (split_artifacts): also accepted, \
hidden from this list: --artifact-dir D --artifact-prefix P (= D --component P: \
output P_generic, P_<arch>), --batch-artifact-parent-dir D (= --batch D), \
--output-dir O (= -o O; an existing directory is fine, existing artifacts in it \
are never replaced), --tmp-dir, --clang-offload-bundler (ignored: \
kpack stages inside the output and needs no bundler). Exit codes stay 0/1/2.";

/// The "Compatibility" paragraph of `kpack recombine --help`.
pub const RECOMBINE_HELP: &str = "\
Compatibility with AMD's rocm-kpack flags (recombine_artifacts): also accepted, \
hidden from this list: --input-shards-dir D (= SHARDS), --output-dir O (= -o O), \
--component C (recombine only that component). \
Exit codes stay 0/1/2.";

/// The "Compatibility" paragraph of `kpack verify --help`.
pub const VERIFY_HELP: &str = "\
Compatibility with AMD's rocm-kpack flags (verify_artifacts): also accepted, \
hidden from this list: --artifacts-dir D (= DIR), \
--clang-offload-bundler (ignored: kpack needs no bundler). Exit codes stay 0/1/2.";

/// AMD's flags that change nothing here.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct Ignored {
    /// AMD's scratch directory (sets TMPDIR there); kpack stages inside
    /// the output directory instead.
    #[arg(long, value_name = "DIR", hide = true)]
    tmp_dir: Option<PathBuf>,
    /// AMD's path to clang-offload-bundler; kpack reads bundles itself.
    #[arg(long, value_name = "PATH", hide = true)]
    clang_offload_bundler: Option<PathBuf>,
}

impl Ignored {
    /// Say on stderr which of AMD's flags were given and are ignored
    /// (AMD's `--verbose` is kpack's own global `-v/--verbose`).
    pub fn note(&self) {
        if let Some(p) = &self.clang_offload_bundler {
            eprintln!(
                "note: --clang-offload-bundler {} ignored: kpack reads offload bundles itself",
                p.display()
            );
        }
        if let Some(p) = &self.tmp_dir {
            eprintln!(
                "note: --tmp-dir {} ignored: kpack stages inside the output directory",
                p.display()
            );
        }
    }
}
