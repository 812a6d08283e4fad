! The Fortran half of a pair of twins (pair.c is the C one; tests/native/test_mpif90.py compares
! their results.json): 2 ranks swap 1000 doubles with MPI_Irecv, MPI_Isend and MPI_Waitall, then
! swap 10 more in place with MPI_Sendrecv_replace (which SMPI carries out with MPI_Sendrecv), then
! sum 250 doubles with MPI_Allreduce, into another buffer and in place (MPI_IN_PLACE).
program pair
  use mpi
  implicit none
  integer :: rank, peer, ierr
  integer :: requests(2), statuses(MPI_STATUS_SIZE, 2)
  double precision :: mine(1000), theirs(1000), part(250), total(250)
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  peer = 1 - rank
  mine = rank + 1
  call MPI_Irecv(theirs, 1000, MPI_DOUBLE_PRECISION, peer, 3, MPI_COMM_WORLD, requests(1), ierr)
  call MPI_Isend(mine, 1000, MPI_DOUBLE_PRECISION, peer, 3, MPI_COMM_WORLD, requests(2), ierr)
  call MPI_Waitall(2, requests, statuses, ierr)
  call MPI_Sendrecv_replace(mine, 10, MPI_DOUBLE_PRECISION, peer, 4, peer, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
  part = theirs(1000) + mine(1)
  call MPI_Allreduce(part, total, 250, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  call MPI_Allreduce(MPI_IN_PLACE, part, 250, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  print '(A,I0,A,F4.1,A,F4.1,A,F4.1)', 'rank ', rank, ' received ', theirs(1000), ' total ', total(250), &
    ' in place ', part(250)
  call MPI_Finalize(ierr)
end program pair
