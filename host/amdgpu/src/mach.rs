//! The `EF_AMDGPU_MACH` table: which processor a code object's `e_flags`
//! name, as data.

/// Mask of `e_flags` that holds the `EF_AMDGPU_MACH` value.
pub const EF_AMDGPU_MACH: u32 = 0x0ff;

/// Every AMDGCN `EF_AMDGPU_MACH` value and its processor, sorted by value.
///
/// From LLVM's `llvm/BinaryFormat/ELF.h` (checked against LLVM's
/// `elf-header-flags-mach.ll` test). gfx940 (0x040) and gfx941 (0x04b) were
/// removed in LLVM 21 and their values reserved; they stay here because
/// code objects built by older compilers carry them. R600 values (below
/// 0x020) are not HSA code objects and are left out: unknown values are
/// "unknown", never an error.
pub const MACH_TABLE: &[(u32, &str)] = &[
    (0x020, "gfx600"),
    (0x021, "gfx601"),
    (0x022, "gfx700"),
    (0x023, "gfx701"),
    (0x024, "gfx702"),
    (0x025, "gfx703"),
    (0x026, "gfx704"),
    // 0x027 is reserved.
    (0x028, "gfx801"),
    (0x029, "gfx802"),
    (0x02a, "gfx803"),
    (0x02b, "gfx810"),
    (0x02c, "gfx900"),
    (0x02d, "gfx902"),
    (0x02e, "gfx904"),
    (0x02f, "gfx906"),
    (0x030, "gfx908"),
    (0x031, "gfx909"),
    (0x032, "gfx90c"),
    (0x033, "gfx1010"),
    (0x034, "gfx1011"),
    (0x035, "gfx1012"),
    (0x036, "gfx1030"),
    (0x037, "gfx1031"),
    (0x038, "gfx1032"),
    (0x039, "gfx1033"),
    (0x03a, "gfx602"),
    (0x03b, "gfx705"),
    (0x03c, "gfx805"),
    (0x03d, "gfx1035"),
    (0x03e, "gfx1034"),
    (0x03f, "gfx90a"),
    (0x040, "gfx940"),
    (0x041, "gfx1100"),
    (0x042, "gfx1013"),
    (0x043, "gfx1150"),
    (0x044, "gfx1103"),
    (0x045, "gfx1036"),
    (0x046, "gfx1101"),
    (0x047, "gfx1102"),
    (0x048, "gfx1200"),
    (0x049, "gfx1250"),
    (0x04a, "gfx1151"),
    (0x04b, "gfx941"),
    (0x04c, "gfx942"),
    // 0x04d is reserved.
    (0x04e, "gfx1201"),
    (0x04f, "gfx950"),
    (0x050, "gfx1310"),
    (0x051, "gfx9-generic"),
    (0x052, "gfx10-1-generic"),
    (0x053, "gfx10-3-generic"),
    (0x054, "gfx11-generic"),
    (0x055, "gfx1152"),
    // 0x056 is reserved.
    (0x057, "gfx1154"),
    (0x058, "gfx1153"),
    (0x059, "gfx12-generic"),
    (0x05a, "gfx1251"),
    (0x05b, "gfx12-5-generic"),
    (0x05c, "gfx1172"),
    (0x05d, "gfx1170"),
    (0x05e, "gfx1171"),
    (0x05f, "gfx9-4-generic"),
    (0x062, "gfx11-7-generic"),
    (0x063, "gfx13-generic"),
];

/// The processor an `EF_AMDGPU_MACH` value names (`0x03f` → `gfx90a`);
/// `None` when the value is not in [`MACH_TABLE`]. Pass `e_flags &
/// EF_AMDGPU_MACH`, not the whole `e_flags`.
///
/// ```
/// assert_eq!(kpack_amdgpu::processor_for_mach(0x02a), Some("gfx803"));
/// assert_eq!(kpack_amdgpu::processor_for_mach(0xfe), None);
/// ```
pub fn processor_for_mach(mach: u32) -> Option<&'static str> {
    MACH_TABLE
        .iter()
        .find(|(m, _)| *m == mach)
        .map(|(_, name)| *name)
}

/// The `EF_AMDGPU_MACH` value of a processor (`gfx90a` → `0x03f`); `None`
/// for names LLVM does not give a value (features and `-strict` are not
/// part of the name here).
pub fn mach_for_processor(processor: &str) -> Option<u32> {
    MACH_TABLE
        .iter()
        .find(|(_, name)| *name == processor)
        .map(|(m, _)| *m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_round_trips_value_and_name() {
        for &(mach, name) in MACH_TABLE {
            assert_eq!(processor_for_mach(mach), Some(name), "{mach:#x}");
            assert_eq!(mach_for_processor(name), Some(mach), "{name}");
        }
    }

    #[test]
    fn table_is_sorted_without_duplicates() {
        for pair in MACH_TABLE.windows(2) {
            assert!(
                pair[0].0 < pair[1].0,
                "{:#x} before {:#x}",
                pair[0].0,
                pair[1].0
            );
        }
        let mut names: Vec<&str> = MACH_TABLE.iter().map(|(_, n)| *n).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), MACH_TABLE.len());
    }

    #[test]
    fn names_old_and_new_processors() {
        // The SDK's old copy stopped at gfx900 and could not name gfx803.
        assert_eq!(processor_for_mach(0x02a), Some("gfx803"));
        assert_eq!(processor_for_mach(0x020), Some("gfx600"));
        assert_eq!(processor_for_mach(0x03c), Some("gfx805"));
        assert_eq!(processor_for_mach(0x04c), Some("gfx942"));
        assert_eq!(processor_for_mach(0x04f), Some("gfx950"));
        assert_eq!(processor_for_mach(0x058), Some("gfx1153"));
        assert_eq!(processor_for_mach(0x04e), Some("gfx1201"));
        assert_eq!(processor_for_mach(0x05a), Some("gfx1251"));
        assert_eq!(processor_for_mach(0x05f), Some("gfx9-4-generic"));
        assert_eq!(processor_for_mach(0x027), None);
        assert_eq!(processor_for_mach(0x000), None);
        assert_eq!(mach_for_processor("gfx90a:xnack+"), None);
    }
}
