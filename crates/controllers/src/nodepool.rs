//! NodePool status and hash controllers (spec §1.2, §1.6, §4.6).
