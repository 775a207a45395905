/**
 * The console page where a person reviews plan `planId` (`Plan.reviewUrl`, DESIGN R49):
 * the console at `base` (the service's address as its clients reach it), opened on that plan.
 */
export function reviewUrl(base: string, planId: string): string {
  return `${base.replace(/\/+$/, '')}/?plan=${encodeURIComponent(planId)}`;
}
