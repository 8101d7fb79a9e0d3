// Inside results/: the `links` group of an HDF5 file or run group (the format in
// results/links_io.hpp), for the results file's writer and reader. Not for rooms above results:
// they read and write whole files through links_io.hpp and hdf5_file.hpp.
#pragma once

#include <hdf5.h>

#include <string>
#include <vector>

#include "results/run_record.hpp"
#include "sim/links.hpp"

namespace bb {

// Writes (or replaces) the group `links` under `parent` (a file or group). Throws IoError
// naming `path`.
void write_links(hid_t parent, const std::vector<LinkFit>& fits, const Attrs& attrs,
                 const std::string& path);
// Reads the group `links` under `parent`; throws IoError when it is missing or broken.
std::vector<LinkFit> read_links(hid_t parent, const std::string& path);

}  // namespace bb
