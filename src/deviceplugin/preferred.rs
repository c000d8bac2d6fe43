//! GetPreferredAllocation: which of the available devices to give a
//! container (placeholder; see the module docs of [`super`]).
