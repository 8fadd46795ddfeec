! Checks libsgemm_blas from Fortran: SGEMM (the symbol sgemm_, gfortran's hidden character
! lengths and all) on every transpose pair against a double-precision loop, with padded
! leading dimensions whose padding must survive, and a bad argument that must leave C alone.
! Stops with code 1 on a failure.
program check
  implicit none
  integer, parameter :: m = 37, n = 29, k = 41, ld = 50
  real :: a(ld, ld), b(ld, ld), c(ld, ld), c0(ld, ld), alpha, beta
  double precision :: want, mag, worst, x
  integer :: i, j, p, t, failures
  character :: ta, tb
  character(len=2), parameter :: pairs(4) = ['NN', 'TN', 'NT', 'TT']

  failures = 0
  alpha = 0.75
  beta = -1.5
  call random_number(a)
  call random_number(b)
  call random_number(c0)
  a = 2 * a - 1
  b = 2 * b - 1
  do t = 1, 4
    ta = pairs(t)(1:1)
    tb = pairs(t)(2:2)
    c = c0
    call sgemm(ta, tb, m, n, k, alpha, a, ld, b, ld, beta, c, ld)
    worst = 0
    do j = 1, n
      do i = 1, m
        want = 0
        mag = 0
        do p = 1, k
          x = dble(opa(i, p)) * dble(opb(p, j))
          want = want + x
          mag = mag + abs(x)
        end do
        want = alpha * want + beta * dble(c0(i, j))
        mag = abs(alpha) * mag + abs(beta * dble(c0(i, j)))
        worst = max(worst, abs(c(i, j) - want) / mag)
      end do
    end do
    if (worst > 16 * epsilon(1.0)) then
      print *, 'FAIL: ', ta, tb, ' error ', worst
      failures = failures + 1
    end if
    if (any(c(m + 1:, 1:n) /= c0(m + 1:, 1:n)) .or. any(c(:, n + 1:) /= c0(:, n + 1:))) then
      print *, 'FAIL: ', ta, tb, ' wrote outside C'
      failures = failures + 1
    end if
  end do

  ! LDC below M: argument 13, reported through XERBLA; C must stay as it was.
  c = c0
  call sgemm('N', 'N', m, n, k, alpha, a, ld, b, ld, beta, c, m - 1)
  if (any(c /= c0)) then
    print *, 'FAIL: C written on an error exit'
    failures = failures + 1
  end if

  if (failures > 0) then
    print *, 'FAILED:', failures
    stop 1
  end if
  print *, 'ok: SGEMM from Fortran'

contains

  real function opa(i, p)
    integer, intent(in) :: i, p
    if (ta == 'N') then
      opa = a(i, p)
    else
      opa = a(p, i)
    end if
  end function

  real function opb(p, j)
    integer, intent(in) :: p, j
    if (tb == 'N') then
      opb = b(p, j)
    else
      opb = b(j, p)
    end if
  end function
end program
