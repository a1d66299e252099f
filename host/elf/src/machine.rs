//! The host architectures kpack rewrites: what differs between them is
//! only the numbers of the two relocation types a wrapper pointer uses.
//! The layout itself works in 4 KiB pages on every machine; a binary
//! linked for larger pages (aarch64's 64 KiB `max-page-size`) keeps them
//! because the cut is a multiple of every later segment's `p_align`.

use object::elf;

/// A host `e_machine` kpack can rewrite.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Machine {
    /// `EM_X86_64`.
    X86_64,
    /// `EM_AARCH64`.
    Aarch64,
}

impl Machine {
    /// The machine for `e_machine`, or `None` when kpack does not know its
    /// relocations.
    pub fn from_e_machine(e_machine: u16) -> Option<Machine> {
        match e_machine {
            elf::EM_X86_64 => Some(Machine::X86_64),
            elf::EM_AARCH64 => Some(Machine::Aarch64),
            _ => None,
        }
    }

    /// `R_*_RELATIVE`: base + addend, what a wrapper pointer becomes.
    pub fn relative(self) -> u32 {
        match self {
            Machine::X86_64 => elf::R_X86_64_RELATIVE,
            Machine::Aarch64 => elf::R_AARCH64_RELATIVE,
        }
    }

    /// `R_*_64` / `R_AARCH64_ABS64`: symbol + addend (`-fgpu-rdc` wrappers).
    pub fn abs64(self) -> u32 {
        match self {
            Machine::X86_64 => elf::R_X86_64_64,
            Machine::Aarch64 => elf::R_AARCH64_ABS64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relocation_numbers_match_the_psabi() {
        assert_eq!(Machine::X86_64.relative(), 8);
        assert_eq!(Machine::X86_64.abs64(), 1);
        assert_eq!(Machine::Aarch64.relative(), 1027);
        assert_eq!(Machine::Aarch64.abs64(), 257);
        assert_eq!(Machine::from_e_machine(183), Some(Machine::Aarch64));
        assert_eq!(Machine::from_e_machine(62), Some(Machine::X86_64));
        assert_eq!(Machine::from_e_machine(21), None);
    }
}
