! The MPI calls Orrery answers itself (mpi.cpp), from Fortran: SMPI's bindings convert and call
! the C entry points. Each rank prints what MPI_Init_thread provided for FUNNELED, what
! MPI_Query_thread and MPI_Is_thread_main answer, and its processor name.
program answered
  use mpi
  implicit none
  integer :: ierr, rank, provided, queried, resultlen
  logical :: is_main
  character(len=MPI_MAX_PROCESSOR_NAME) :: name
  call MPI_Init_thread(MPI_THREAD_FUNNELED, provided, ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Query_thread(queried, ierr)
  call MPI_Is_thread_main(is_main, ierr)
  call MPI_Get_processor_name(name, resultlen, ierr)
  print '(A,I0,A,I0,A,I0,A,L1,A,A)', 'rank ', rank, ' provided ', provided, ' queried ', queried, &
    ' main ', is_main, ' name ', name(1:resultlen)
  call MPI_Finalize(ierr)
end program answered
