// The signed-in principal (whoami) and what its role may do.

const ACTORS = ['REVIEWER', 'ADMIN'];

/** { name, role, groups } once known. */
let me = null;

export function setMe(principal) {
  me = principal;
}

export function currentUser() {
  return me;
}

export const canAct = () => Boolean(me && ACTORS.includes(me.role));
export const isAdmin = () => Boolean(me && me.role === 'ADMIN');
