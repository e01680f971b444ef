// The one place PostgreSQL's C headers enter C++. Include it last in a .cpp
// (after every standard header): port.h redefines printf/snprintf/strerror as
// macros, which would break <cstdio> and friends included after it. Headers
// that other C++ code includes never include this file; they forward-declare.
#pragma once

extern "C" {
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type_d.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "libpq/be-fsstubs.h"
#include "libpq/libpq-fs.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/elog.h"
#include "utils/fmgrprotos.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/tuplestore.h"
}
