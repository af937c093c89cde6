# SPDX-License-Identifier: Apache-2.0
# CTest script: a checkpoint saved by `mpirun -np 4 fsdpsim train --save` (dp=4 zero3 padded)
# resumes under `mpirun -np 2` resharded onto dp=2 unpadded (the same 8 samples per step: two
# microbatches per rank, grad_scale 0.5 keeps the gradient) and passes --check against the
# unsharded reference; the steps continue at 3.
# Variables: MPIEXEC, MPIEXEC_NUMPROC_FLAG, FSDPSIM, OUT_DIR.
set(dir ${OUT_DIR}/checkpoint_mpi)
file(REMOVE_RECURSE ${dir})
set(model --hidden 8 --ffn 16 --vocab 16 --seq-len 4 --lr 0.05 --timeout 120)
execute_process(COMMAND ${MPIEXEC} ${MPIEXEC_NUMPROC_FLAG} 4 --oversubscribe --mca btl self,vader
                        ${FSDPSIM} train --mesh dp=4 --steps 2 --save ${dir} ${model}
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR NOT EXISTS ${dir}/step-2/rank-3.bin)
  message(FATAL_ERROR "mpirun -np 4 train --save failed (${rc}): ${out} ${err}")
endif()
execute_process(COMMAND ${MPIEXEC} ${MPIEXEC_NUMPROC_FLAG} 2 --oversubscribe --mca btl self,vader
                        ${FSDPSIM} train --mesh dp=2 --shard-layout unpadded --microbatches 2
                        --grad-scale 0.5 --steps 4 --resume ${dir} --check ${model}
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "mpirun -np 2 train --resume failed (${rc}): ${out} ${err}")
endif()
if(NOT out MATCHES "step 3 loss" OR NOT out MATCHES "step 4 loss" OR out MATCHES "step 2 loss"
   OR NOT out MATCHES ": ok")
  message(FATAL_ERROR "the resumed run did not continue at step 3 and pass --check: ${out}")
endif()
message(STATUS "resumed on 2 MPI ranks from a 4-rank checkpoint: ${out}")
