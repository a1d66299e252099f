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

/// The "Compatibility" paragraph of `kpack wheel split --help`.
pub const WHEEL_SPLIT_HELP: &str = "\
Compatibility with AMD's rocm-kpack flags (split_python_wheels): also accepted, \
hidden from this list: --input WHL|DIR (= INPUT; a directory is an unpacked wheel), --output-dir O (= -o O), \
--device-package-prefix P (= --device-prefix P), \
--databases NAME... (= --split-databases), --tmp-dir, --clang-offload-bundler \
(ignored: kpack stages inside the output and needs no bundler); AMD's --verbose is \
-v/--verbose. --overlay-root selects AMD's layout, names and metadata. Exit codes stay 0/1/2.";

/// `--output-format` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    /// `.whl` files.
    Wheel,
    /// Unpacked wheel directories, named as the wheel without `.whl`.
    Directory,
}

/// `--wheel-type` presets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum WheelType {
    /// PyTorch's libraries: rocblas, hipblaslt, hipsparselt, aotriton, miopen.
    TorchFat,
}

impl WheelType {
    /// The database handlers of the preset, in AMD's order.
    pub fn handlers(self) -> &'static [&'static str] {
        match self {
            WheelType::TorchFat => &["rocblas", "hipblaslt", "hipsparselt", "aotriton", "miopen"],
        }
    }
}

/// AMD's `split_python_wheels` flags on `kpack wheel split`.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct WheelArgs {
    /// AMD's --input: the fat wheel.
    #[arg(long = "input", id = "amd_input", value_name = "WHL", hide = true)]
    pub input: Option<PathBuf>,
    /// AMD's layout, names and metadata: split the fat binaries and
    /// database files under ROOT (a directory of the wheel, `torch/`) into
    /// one archive per target id at ROOT/.kpack/<name>_<target>.kpack,
    /// device wheels per target plus parent wheels (family, sub-family),
    /// host extras device-<target> and device-all. Needs --device-prefix.
    #[arg(long, value_name = "ROOT", help_heading = "AMD's layout")]
    pub overlay_root: Option<String>,
    /// With --overlay-root: more Requires-Dist of every target device
    /// wheel, @GFXARCH@ replaced by its target (`rocm-sdk-device-@GFXARCH@ == 7.1`).
    #[arg(long, value_name = "REQ", num_args = 0.., help_heading = "AMD's layout")]
    pub device_requires_dist: Vec<String>,
    /// With --overlay-root: write `.whl` files (`wheel`, the default) or
    /// unpacked wheel directories (`directory`).
    #[arg(long, value_enum, value_name = "FORMAT", help_heading = "AMD's layout")]
    pub output_format: Option<OutputFormat>,
    /// AMD's database preset (`torch-fat`: rocblas, hipblaslt, hipsparselt,
    /// aotriton, miopen); --databases or --split-databases replace it.
    #[arg(long, value_enum, value_name = "PRESET", help_heading = "AMD's layout")]
    pub wheel_type: Option<WheelType>,
    /// AMD's --databases NAME...: the handlers (= --split-databases).
    #[arg(long, value_name = "NAME", num_args = 0.., hide = true)]
    pub databases: Option<Vec<String>>,
    /// With --overlay-root, experimental: also write AMD's PEP 817 variant
    /// wheel, a copy of the host wheel with variant.json and variant markers.
    #[arg(long, help_heading = "AMD's layout")]
    pub generate_variant_wheel: bool,
    /// The variant wheel's label [default: `variant`]; only with
    /// --generate-variant-wheel.
    #[arg(long, value_name = "LABEL", help_heading = "AMD's layout")]
    pub variant_label: Option<String>,
    #[command(flatten)]
    pub ignored: Ignored,
}

impl WheelArgs {
    /// The handler names AMD's --databases and --wheel-type ask for
    /// (--databases wins, as in AMD's tool); `None` when neither is given.
    pub fn databases(&self) -> Option<Vec<String>> {
        match (&self.databases, self.wheel_type) {
            (Some(d), _) => Some(d.clone()),
            (None, Some(t)) => Some(t.handlers().iter().map(|s| s.to_string()).collect()),
            (None, None) => None,
        }
    }

    /// AMD's layout, when --overlay-root asks for it; the flags that only
    /// mean something with it are refused without it, in one line.
    pub fn layout(&self) -> anyhow::Result<Option<kpack_wheel::AmdLayout>> {
        let Some(root) = &self.overlay_root else {
            let only_amd = [
                (
                    !self.device_requires_dist.is_empty(),
                    "--device-requires-dist",
                ),
                (self.output_format.is_some(), "--output-format"),
                (self.generate_variant_wheel, "--generate-variant-wheel"),
            ];
            if let Some((_, flag)) = only_amd.iter().find(|(given, _)| *given) {
                anyhow::bail!(
                    "{flag} needs --overlay-root: it only applies to AMD's layout (device wheels overlaying ROOT)"
                );
            }
            return Ok(None);
        };
        // As in AMD's tool, --variant-label alone changes nothing.
        let variant_label = self.generate_variant_wheel.then(|| {
            self.variant_label
                .clone()
                .unwrap_or_else(|| kpack_wheel::DEFAULT_VARIANT_LABEL.to_string())
        });
        Ok(Some(kpack_wheel::AmdLayout {
            overlay_root: root.trim_matches('/').to_string(),
            device_requires_dist: self.device_requires_dist.clone(),
            directories: self.output_format == Some(OutputFormat::Directory),
            variant_label,
            variant_provider: kpack_wheel::VariantProvider::Amd,
        }))
    }
}
