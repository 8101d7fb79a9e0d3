// Plain-text tables and number formatting: they live with the run table in the harness.
#pragma once

#include "harness/table.hpp"
