/* What src/bindings.rs is generated from (regenerate.sh): the whole public header and
 * the opt-in testing kit, which the safe crate's `testing` module wraps. */
#include <mongoelector.h>
#include <mongoelector/testing.h>
