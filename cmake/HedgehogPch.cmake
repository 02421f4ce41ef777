# One precompiled header of the Torch API the project uses (cmake/torch_pch.h), built once by the
# object library hh_torch_pch and reused by every target with Torch sources. Measured in
# docs/performance.md ("Build time"): parsing that API costs 7-11 s per translation unit, loading
# the precompiled header 2.5-4 s; the old precompiled torch/torch.h (568 MB) cost 6-10 s to load
# in every file, Torch-free ones included.
#   hh_torch_pch(target)  sources of `target` that reach a Torch header through their includes
#                         (quoted includes followed through the tree, as engine.layering reads
#                         them) use the precompiled header; the others compile without it.
# Reuse needs the same code-generation flags everywhere: position-independent code is on for the
# whole build (Qt's targets require it), and the holder links what every Torch target links.
option(HH_PCH "Precompile the shared Torch header (off: every source parses its own includes)" ON)
if(HH_PCH)
  add_library(hh_torch_pch OBJECT ${PROJECT_SOURCE_DIR}/cmake/pch_holder.cpp)
  target_link_libraries(hh_torch_pch PRIVATE hh_torch)
  target_precompile_headers(hh_torch_pch PRIVATE ${PROJECT_SOURCE_DIR}/cmake/torch_pch.h)
endif()

# Whether `file` reaches <torch/...>, <ATen/...> or <c10/...> through its #includes; remembered
# per file for the whole configure run.
function(hh_reaches_torch file out)
  get_property(known GLOBAL PROPERTY "HH_REACHES_TORCH_${file}" SET)
  if(known)
    get_property(value GLOBAL PROPERTY "HH_REACHES_TORCH_${file}")
    set(${out} ${value} PARENT_SCOPE)
    return()
  endif()
  set_property(GLOBAL PROPERTY "HH_REACHES_TORCH_${file}" OFF)  # an include cycle ends here
  set(result OFF)
  if(EXISTS ${file})
    file(STRINGS ${file} includes REGEX "^[ \t]*#[ \t]*include[ \t]*[<\"]")
    foreach(line IN LISTS includes)
      if(line MATCHES "<(torch|ATen|c10)/")
        set(result ON)
      elseif(line MATCHES "\"((engine|app|tests|widgets)/[^\"]+)\"")
        hh_reaches_torch(${PROJECT_SOURCE_DIR}/${CMAKE_MATCH_1} result)
      endif()
      if(result)
        break()
      endif()
    endforeach()
  endif()
  set_property(GLOBAL PROPERTY "HH_REACHES_TORCH_${file}" ${result})
  set(${out} ${result} PARENT_SCOPE)
endfunction()

function(hh_torch_pch target)
  if(NOT HH_PCH)
    return()
  endif()
  target_precompile_headers(${target} REUSE_FROM hh_torch_pch)
  get_target_property(sources ${target} SOURCES)
  get_target_property(dir ${target} SOURCE_DIR)
  foreach(src IN LISTS sources)
    if(NOT src MATCHES "\\.cpp$")
      continue()
    endif()
    get_filename_component(path ${src} ABSOLUTE BASE_DIR ${dir})
    hh_reaches_torch(${path} torch)
    if(NOT torch)
      set_source_files_properties(${path} TARGET_DIRECTORY ${target} PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
    endif()
  endforeach()
endfunction()
