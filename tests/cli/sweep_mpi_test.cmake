# SPDX-License-Identifier: Apache-2.0
# CTest script: `fsdpsim sweep` under `mpirun -np 2` must print exactly what one process prints.
# Variables: MPIEXEC, MPIEXEC_NUMPROC_FLAG, FSDPSIM, MODEL, OUT_DIR.
set(sweep_args sweep --model ${MODEL} --ranks 8 --strategies zero3,hsdp --microbatches 1,2
               --prefetch 0,1 --seq-len 256 --jobs 1)
foreach(format text json)
  execute_process(COMMAND ${FSDPSIM} ${sweep_args} --format ${format}
                  OUTPUT_VARIABLE single ERROR_VARIABLE single_err RESULT_VARIABLE single_rc)
  if(NOT single_rc EQUAL 0)
    message(FATAL_ERROR "single-process sweep failed (${single_rc}): ${single_err}")
  endif()
  execute_process(COMMAND ${MPIEXEC} ${MPIEXEC_NUMPROC_FLAG} 2 --oversubscribe
                          ${FSDPSIM} ${sweep_args} --format ${format}
                  OUTPUT_VARIABLE multi ERROR_VARIABLE multi_err RESULT_VARIABLE multi_rc)
  if(NOT multi_rc EQUAL 0)
    message(FATAL_ERROR "mpirun sweep failed (${multi_rc}): ${multi_err}")
  endif()
  if(NOT single STREQUAL multi)
    file(WRITE ${OUT_DIR}/sweep_single.${format} "${single}")
    file(WRITE ${OUT_DIR}/sweep_mpi.${format} "${multi}")
    message(FATAL_ERROR "mpirun -np 2 output differs from the single-process output "
                        "(${format}); see ${OUT_DIR}/sweep_single.${format} and sweep_mpi.${format}")
  endif()
  string(LENGTH "${single}" length)
  if(length LESS 100)
    message(FATAL_ERROR "sweep printed almost nothing: '${single}'")
  endif()
endforeach()
message(STATUS "mpirun -np 2 sweep output matches the single process (text and json)")
